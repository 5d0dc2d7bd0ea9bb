"""The privileged state of real LIBERO scenes and ``vla-rl collect`` recording the scripted expert
there (`make test-libero`, in `.venv-libero`; skipped where LIBERO is not installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("libero") is None or importlib.util.find_spec("robosuite") is None,
    reason="LIBERO is not installed here; `make test-libero` runs these tests in .venv-libero",
)

from vla_rl.sims.libero.expert import ACTION_NAMES, split_privileged  # noqa: E402
from vla_rl.sims.libero.privileged import PRIVILEGED_DIM  # noqa: E402

from vla_rl.cli import main as vla_rl_main  # noqa: E402
from vla_rl.data.lerobot_format import open_dataset  # noqa: E402
from vla_rl.envs import EnvConfig, make_env  # noqa: E402


def first_privileged(task: str, **options) -> dict[str, np.ndarray]:
    env = make_env(EnvConfig(backend="libero", task=task, num_envs=1, cameras=[], options=options))
    try:
        obs, _ = env.reset(seed=0)
    finally:
        env.close()
    assert obs["privileged"].shape == (1, PRIVILEGED_DIM)
    return {key: value[0] for key, value in split_privileged(obs["privileged"].numpy()).items()}


def test_object_task_privileged_state_names_the_goal_object_and_the_basket_region():
    p = first_privileged("libero_object/0", init_states="protocol")
    # the object's body sits inside its collision box, which stands on the floor (z = 0)
    assert np.all(p["object_box_lo"] <= p["object_pos"]) and np.all(p["object_pos"] <= p["object_box_hi"])
    assert abs(p["object_box_lo"][2]) < 0.005
    # the basket's region is a box site: centred on its position, flagged as a region
    assert p["target_is_region"][0] == 1.0
    np.testing.assert_allclose((p["target_box_lo"] + p["target_box_hi"]) / 2, p["target_pos"], atol=1e-5)
    # initial state 0 keeps the soup and the basket apart
    assert np.linalg.norm(p["object_pos"][:2] - p["target_pos"][:2]) > 0.2


def test_a_region_goal_with_one_argument_reads_the_region_and_no_target():
    # libero_goal/0: (Open wooden_cabinet_1_middle_region): the "object" is the drawer's region site
    p = first_privileged("libero_goal/0", init_states="protocol")
    assert np.all(p["object_box_lo"] < p["object_box_hi"])
    np.testing.assert_allclose((p["object_box_lo"] + p["object_box_hi"]) / 2, p["object_pos"], atol=1e-5)
    for key in ("target_pos", "target_box_lo", "target_box_hi", "target_is_region"):
        assert not p[key].any(), key


def test_spatial_task_privileged_state_matches_after_a_hard_reset():
    soft = first_privileged("libero_spatial/0", init_states="protocol")
    hard = first_privileged("libero_spatial/0", init_states="protocol", hard_reset=True)
    assert soft["target_is_region"][0] == 0.0  # the plate is an object: the bowl goes on it
    # bowl and plate both stand on the table; the bowl is wider than the hand opens (8 cm)
    assert abs(soft["object_box_lo"][2] - soft["target_box_lo"][2]) < 0.01
    assert soft["object_box_hi"][1] - soft["object_box_lo"][1] > 0.08
    for key in soft:
        np.testing.assert_allclose(hard[key], soft[key], atol=1e-6, err_msg=key)


def test_the_cameras_of_libero_datasets_are_named_as_there():
    """``image`` / ``wrist_image`` (LIBERO's LeRobot datasets) render agentview / robot0_eye_in_hand."""
    frames = {}
    for cameras in (["agentview", "robot0_eye_in_hand"], ["image", "wrist_image"]):
        cfg = EnvConfig(
            backend="libero",
            task="libero_object/0",
            num_envs=1,
            cameras=cameras,
            image_size=32,
            options={"init_states": "protocol", "image_orientation": "rotate180"},
        )
        env = make_env(cfg)
        try:
            obs, _ = env.reset(seed=0)
        finally:
            env.close()
        frames[cameras[0]] = [obs[f"rgb_{camera}"][0].numpy() for camera in cameras]
    for alias, own in zip(frames["image"], frames["agentview"], strict=True):
        assert np.array_equal(alias, own)
    assert not np.array_equal(*frames["image"])


def test_vla_rl_collect_records_a_successful_libero_expert_episode(tmp_path: Path):
    out = tmp_path / "soup"
    args = [
        "collect",
        "env=libero",
        "env.task=libero_object/0",
        "env.num_envs=1",
        "env.cameras=[agentview]",
        "env.image_size=32",
        "+env.options.init_states=protocol",
        "num_episodes=1",
        "max_attempts=1",
        f"output_dir={out}",
    ]
    assert vla_rl_main(args) == 0
    dataset = open_dataset(out)
    assert dataset.num_episodes == 1 and dataset.fps == 20.0
    assert dataset.features["action"]["names"] == list(ACTION_NAMES)
    assert len(dataset.features["observation.privileged"]["names"]) == PRIVILEGED_DIM
    assert dataset.features["observation.images.agentview"]["shape"][:2] == [32, 32]
    episode = dataset.episode(0)
    assert episode.instruction == "pick up the alphabet soup and place it in the basket"
    assert episode.success and episode.success_per_step[-1] and not episode.success_per_step[:-1].any()
    assert 50 < len(episode) < 280
    # the gripper starts open and closes on the soup (LIBERO's In check can pass before it lets go)
    closed = episode.actions[:, 6] > 0
    assert closed.any() and not closed[0]
