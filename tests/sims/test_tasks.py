import colorsys

import numpy as np
import pytest
import torch
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv
from vla_rl.sims.mujoco.randomization import SPLITS, in_train_region
from vla_rl.sims.tasks.base import TaskState, closeness, is_grasped
from vla_rl.sims.tasks.lift import LiftTask
from vla_rl.sims.tasks.pick_place import COLOURS, HELDOUT_TEMPLATES, TRAIN_TEMPLATES, PickPlaceTask
from vla_rl.sims.tasks.reach import ReachTask
from vla_rl.sims.tasks.registry import TASKS
from vla_rl.sims.tasks.scripted import scripted_action

from vla_rl.envs.config import EnvConfig


def _state(task, tcp, opening, goals, **sensors) -> TaskState:
    n = len(tcp)
    sensordata = np.zeros((n, 64))
    for name, value in sensors.items():
        sensordata[:, task._sensor_slices[name]] = value
    return TaskState(np.asarray(tcp, float), np.asarray(opening, float), sensordata, np.asarray(goals, float))


def test_closeness_by_hand():
    # 1 - tanh(10 * 0.05) = 1 - tanh(0.5) = 1 - 0.46211716
    np.testing.assert_allclose(closeness(np.array([0.0, 0.05])), [1.0, 0.53788284], rtol=1e-7)


def test_reach_reward_by_hand():
    task = ReachTask()
    state = _state(task, [[0, 0, 0], [0, 0, 0]], [0.08, 0.08], [[0.03, 0.0, 0.04], [0.0, 0.0, 0.0]])
    reward, success = task.reward_and_success(state)
    # distance 0.05 is not < 0.05: 0.9 * 0.53788284; distance 0: 0.9 * 1 + 0.1.
    np.testing.assert_allclose(reward, [0.9 * 0.53788284, 1.0], rtol=1e-7)
    assert success.tolist() == [False, True]


def test_grasp_detection():
    tcp = np.zeros((4, 3))
    cube = np.array([[0.0, 0.0, 0.01], [0.0, 0.0, 0.03], [0, 0, 0], [0, 0, 0]])
    opening = np.array([0.04, 0.04, 0.08, 0.0])
    assert is_grasped(tcp, cube, opening).tolist() == [True, False, False, False]


def test_lift_reward_by_hand():
    task = LiftTask()
    task._sensor_slices = {"cube_pos": slice(3, 6)}
    tcp = [[0.5, 0.0, 0.08], [0.5, 0.0, 0.05]]
    state = _state(task, tcp, [0.04, 0.04], [[0.02], [0.02]], cube_pos=np.array(tcp))
    reward, success = task.reward_and_success(state)
    # held at 0.06 above rest: 0.25 + 0.15 + 0.5 * 1 + 0.1; held at 0.03: 0.25 + 0.15 + 0.5 * 0.6.
    np.testing.assert_allclose(reward, [1.0, 0.7], rtol=1e-9)
    assert success.tolist() == [True, False]


def test_pick_place_reward_by_hand():
    # goals: cube 0 (red) on pad 1 (green), template 0, pads at (0.5, 0), (0.6, 0), (0.7, 0).
    task = PickPlaceTask()
    task._sensor_slices = {f"cube_{c}_pos": slice(3 * i, 3 * i + 3) for i, c in enumerate(COLOURS)}
    goals = [[0, 1, 0, 0.5, 0.0, 0.6, 0.0, 0.7, 0.0]] * 3
    red = np.array([[0.6, 0.0, 0.08], [0.63, 0.0, 0.02], [0.5, 0.0, 0.02]])
    tcp = red + [[0.0, 0.0, 0.0], [0.0, 0.0, 0.05], [0.0, 0.0, 0.0]]
    state = _state(task, tcp, [0.04, 0.08, 0.08], goals, cube_red_pos=red)
    reward, success = task.reward_and_success(state)
    # held 8 cm above the named pad's centre: 0.2 * 1 + 0.15 * 1 + 0.55 * 1 = 0.9;
    # resting 3 cm from that centre (inside 4 cm), gripper open 5 cm above: success, 1.0 (the
    # progress terms would give 0.2 * 0.53788 + 0.55 * (1 - tanh(0.3)) = 0.4944);
    # resting on the wrong pad, 10 cm away: 0.2 * 1 + 0.55 * (1 - tanh(1)) = 0.2 + 0.55 * 0.23841.
    np.testing.assert_allclose(reward, [0.9, 1.0, 0.2 + 0.55 * 0.23840584], rtol=1e-6)
    assert success.tolist() == [False, True, False]


@pytest.mark.parametrize("task", sorted(TASKS))
def test_scripted_policy_solves_most_worlds(task):
    env = MujocoBatchedEnv(EnvConfig(task=task, num_envs=12, control_mode="ee_delta_pos"))
    obs, _ = env.reset(seed=2024)
    for _ in range(env.max_episode_steps):
        result = env.step(scripted_action(task, obs))
        obs = result.obs
    assert result.truncated.all()
    success_rate = result.info["episode"]["success"].float().mean().item()
    print(f"{task}: scripted success {success_rate:.2f}")
    assert success_rate >= 0.8
    env.close()


def test_ood_position_samples_outside_the_train_region():
    xy = {}
    for split in ("train", "ood_position"):
        env = MujocoBatchedEnv(EnvConfig(task="lift", num_envs=16, split=split))
        obs, _ = env.reset(seed=0)
        xy[split] = LiftTask().split_privileged(obs["privileged"].numpy())["cube_pos"][:, :2]
        env.close()
    assert in_train_region(xy["train"]).all()
    assert not in_train_region(xy["ood_position"]).any()


def _hue(rgba: np.ndarray) -> float:
    return colorsys.rgb_to_hsv(*rgba[:3])[0]


def test_ood_visual_uses_held_out_object_colours():
    for split in ("train", "ood_visual"):
        env = MujocoBatchedEnv(EnvConfig(task="push", num_envs=16, split=split))
        env.reset(seed=0)
        hues = [_hue(m.geom_rgba[m.geom("cube_geom").id]) for m in env.models]
        inside = [
            any(lo - 1e-6 <= h <= hi + 1e-6 for lo, hi in SPLITS[split].object_hue_ranges) for h in hues
        ]
        assert all(inside)
        cams = np.stack([m.cam_pos[m.camera("front").id] for m in env.models])
        assert cams.std(axis=0).max() > 0  # camera pose differs per world
        env.close()
    assert set(SPLITS["train"].object_hue_ranges).isdisjoint(SPLITS["ood_visual"].object_hue_ranges)


def test_pick_place_instructions_and_held_out_phrasings():
    task = PickPlaceTask()
    env = MujocoBatchedEnv(EnvConfig(task="pick_place", num_envs=16))
    obs, _ = env.reset(seed=0)
    priv = task.split_privileged(obs["privileged"].numpy())
    for text, cube, pad in zip(obs["instruction"], priv["cube_onehot"], priv["pad_onehot"], strict=True):
        named = [COLOURS[int(cube.argmax())], COLOURS[int(pad.argmax())]]
        assert any(t.format(cube=named[0], pad=named[1]) == text for t in TRAIN_TEMPLATES)
    first = list(obs["instruction"])
    obs, _ = env.reset()
    assert obs["instruction"] != first  # instructions change on reset
    env.close()
    env = MujocoBatchedEnv(EnvConfig(task="pick_place", num_envs=16, split="ood_semantic"))
    obs, _ = env.reset(seed=0)
    heldout = {t.format(cube=c, pad=p) for t in HELDOUT_TEMPLATES for c in COLOURS for p in COLOURS}
    assert set(obs["instruction"]) <= heldout
    env.close()


def test_pick_place_cube_colours_stay_recognisable():
    env = MujocoBatchedEnv(EnvConfig(task="pick_place", num_envs=8, split="ood_visual"))
    env.reset(seed=3)
    for m in env.models:
        for colour, expected in zip(COLOURS, (0.0, 0.33, 0.62), strict=True):
            hue = _hue(m.geom_rgba[m.geom(f"cube_{colour}_geom").id])
            assert min(abs(hue - expected), 1 - abs(hue - expected)) < 0.05
    env.close()


def test_privileged_layout_matches_dimension():
    for cls in TASKS.values():
        env = MujocoBatchedEnv(EnvConfig(task=cls.name, num_envs=2))
        obs, _ = env.reset(seed=0)
        assert obs["privileged"].shape == (2, cls().privileged_dim)
        assert torch.isfinite(obs["privileged"]).all()
        env.close()


@pytest.mark.parametrize("name", sorted(TASKS))
def test_objects_observation_is_the_object_fields_of_privileged(name):
    task = TASKS[name]()
    names = [field for field, _ in task.privileged_fields]
    assert task.object_fields and set(task.object_fields) <= set(names)
    env = MujocoBatchedEnv(EnvConfig(task=name, num_envs=2, num_threads=1))
    try:
        obs, _ = env.reset(seed=0)
        views = task.split_privileged(obs["privileged"].numpy())
        expected = np.concatenate([views[field] for field in task.object_fields], axis=1)
        assert env.observation_space["objects"].shape == (task.object_dim,)
        np.testing.assert_array_equal(obs["objects"].numpy(), expected)
        # The torch path of object_state gives the same numbers as the numpy path.
        torch.testing.assert_close(task.object_state(obs["privileged"]), obs["objects"])
    finally:
        env.close()


def test_pick_place_objects_say_where_things_are_not_which_one_is_named():
    """Cube positions (3 x 3) and pad positions (3 x 2) only: no one-hots, no goal-relative vectors."""
    task = PickPlaceTask()
    assert task.object_fields == ("cubes_pos", "pads_xy")
    assert task.object_dim == 3 * 3 + 3 * 2
