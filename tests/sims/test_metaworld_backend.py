"""MetaWorld backend against the real simulator (runs in ``.venv-metaworld``: ``make test-metaworld``).

Numbers worked out from MetaWorld's ``reach-v3`` definition: the hand starts at (0, 0.6, 0.2) with
the gripper open; the goal is drawn from x in [-0.1, 0.1], y in [0.8, 0.9], z in [0.05, 0.3]; an
action unit moves the hand's mocap target 1 cm per step.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import backend_unavailable_reason, make_env

reason = backend_unavailable_reason("metaworld")
pytestmark = pytest.mark.skipif(reason is not None, reason=f"metaworld: {reason}")

REACH_HAND_START_M = np.array([0.0, 0.6, 0.2])
REACH_GOAL_LOW_M, REACH_GOAL_HIGH_M = np.array([-0.1, 0.8, 0.05]), np.array([0.1, 0.9, 0.3])


def _env(task: str = "reach-v3", num_envs: int = 2, **kwargs):
    return make_env(EnvConfig(backend="metaworld", task=task, num_envs=num_envs, **kwargs))


def test_task_lists_match_metaworld():
    from metaworld import env_dict, policies
    from vla_rl.sims.metaworld.experts import policy_class_name
    from vla_rl.sims.metaworld.tasks import INSTRUCTIONS, MT10_TASKS

    assert list(INSTRUCTIONS) == list(env_dict.ALL_V3_ENVIRONMENTS) == list(env_dict.MT50_V3)
    assert list(MT10_TASKS) == list(env_dict.MT10_V3)
    assert all(hasattr(policies, policy_class_name(task)) for task in INSTRUCTIONS)


def test_reach_observation_starts_at_the_hand_position_with_the_goal_in_range():
    with _env(num_envs=3) as env:
        obs, _ = env.reset(seed=0)
        assert env.max_episode_steps == 500 and env.control_hz == pytest.approx(80.0)
        proprio, state = obs["proprio"].numpy(), obs["privileged"].numpy()
        np.testing.assert_array_equal(proprio, state[:, :4])
        np.testing.assert_allclose(proprio[:, :3], np.tile(REACH_HAND_START_M, (3, 1)), atol=0.01)
        np.testing.assert_allclose(proprio[:, 3], 1.0)  # gripper open
        goals = state[:, -3:]
        assert np.all(goals >= REACH_GOAL_LOW_M) and np.all(goals <= REACH_GOAL_HIGH_M)
        assert len({tuple(goal) for goal in goals}) == 3, "each world draws its own goal"
        assert obs["instruction"] == ["reach the red goal position"] * 3


def test_world_seed_picks_the_variation_and_a_partial_reset_keeps_the_others():
    with _env(num_envs=3) as env:
        first, _ = env.reset(seed=[env.world_seed(4, 0), env.world_seed(4, 0), env.world_seed(9, 0)])
        goals = first["privileged"][:, -3:]
        assert torch.equal(goals[0], goals[1]) and not torch.equal(goals[0], goals[2])
        again, _ = env.reset(seed=[env.world_seed(9, 0)], env_ids=torch.tensor([0]))
        assert torch.equal(again["privileged"][0], first["privileged"][2])
        assert torch.equal(again["privileged"][1:], first["privileged"][1:])


def test_actions_move_the_mocap_one_centimetre_per_unit_and_close_the_gripper():
    with _env(num_envs=2) as env:
        obs, _ = env.reset(seed=0)
        mocap_start = np.stack([world.data.mocap_pos[0].copy() for world in env.worlds])
        action = torch.tensor([[1.0, 0.0, 0.0, -1.0], [0.0, 0.0, -1.0, 1.0]])
        for _ in range(10):
            result = env.step(action)
        moved = np.stack([world.data.mocap_pos[0] for world in env.worlds]) - mocap_start
        np.testing.assert_allclose(moved, [[0.10, 0.0, 0.0], [0.0, 0.0, -0.10]], atol=1e-9)
        hand = (result.obs["proprio"] - obs["proprio"]).numpy()
        assert 0.03 < hand[0, 0] < 0.10 and -0.10 < hand[1, 2] < -0.03, "the hand follows its target"
        assert hand[0, 3] == pytest.approx(0.0, abs=1e-3) and hand[1, 3] < -0.2, "only +1 closes the gripper"


def test_mt10_worlds_run_their_tasks_with_their_instructions():
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS
    from vla_rl.sims.metaworld.tasks import INSTRUCTIONS, MT10_TASKS

    with _env("MT10", num_envs=11, max_episode_steps=3) as env:
        obs, _ = env.reset(seed=1)
        expected = [*MT10_TASKS, MT10_TASKS[0]]
        assert env.tasks == expected
        assert obs["instruction"] == [INSTRUCTIONS[task] for task in expected]
        assert [type(world) for world in env.worlds] == [ALL_V3_ENVIRONMENTS[task] for task in expected]


@pytest.mark.filterwarnings("ignore:.*precision lowered by casting:UserWarning")
def test_task_onehot_is_the_one_metaworlds_mt10_envs_append():
    import gymnasium as gym
    import metaworld  # noqa: F401  (registers the Meta-World/ envs)
    from metaworld.env_dict import ALL_V3_ENVIRONMENTS

    reference = gym.make_vec("Meta-World/MT10", vector_strategy="sync", use_one_hot=True, seed=0)
    try:
        reference_obs, _ = reference.reset(seed=0)
        names = {cls: task for task, cls in ALL_V3_ENVIRONMENTS.items()}
        reference_tasks = [names[type(env.unwrapped)] for env in reference.envs]
    finally:
        reference.close()
    assert reference_obs.shape == (10, 39 + 10)
    onehot_by_task = dict(zip(reference_tasks, torch.from_numpy(reference_obs[:, 39:]).float(), strict=True))
    with _env("MT10", num_envs=12, max_episode_steps=3, options={"task_layout": "blocks"}) as env:
        obs, _ = env.reset(seed=1)
        step = env.step(torch.zeros(12, 4))
        expected = torch.stack([onehot_by_task[task] for task in env.tasks])
    assert torch.equal(obs["task_onehot"], expected) and torch.equal(step.obs["task_onehot"], expected)
    assert env.tasks[:3] == ["reach-v3", "reach-v3", "push-v3"]
    with _env("drawer-close-v3+reach-v3", num_envs=3) as env:
        obs, _ = env.reset(seed=0)
    assert obs["task_onehot"].tolist() == [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]


def test_expert_success_terminates_the_episode_when_asked():
    from vla_rl.sims.metaworld.experts import MetaWorldExpert

    with _env(num_envs=2, max_episode_steps=150, options={"terminate_on_success": True}) as env:
        expert = MetaWorldExpert(env.tasks)
        obs, _ = env.reset(seed=3)
        for _ in range(150):
            result = env.step(expert.act(obs)[0])
            if result.done.any():
                break
            obs = result.obs
        assert result.terminated.any() and not result.truncated.any()
        ended = result.terminated
        assert result.info["success"][ended].all() and result.info["episode"]["success_once"][ended].all()
        assert (result.info["episode"]["length"][ended] < 150).all()


def test_corner_camera_is_turned_upright_and_topview_is_left_as_rendered():
    import mujoco
    from vla_rl.sims.metaworld.cameras import camera_is_upside_down

    with _env(num_envs=1, cameras=["corner", "topview"], image_size=32) as env:
        obs, _ = env.reset(seed=0)
        world = env.worlds[0]
        corner = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_CAMERA, "corner")
        topview = mujoco.mj_name2id(world.model, mujoco.mjtObj.mjOBJ_CAMERA, "topview")
        # corner's xyaxes put its image y axis along (-0.2, -0.2, -1): z-component -1/sqrt(1.08) < 0.
        assert world.data.cam_xmat[corner][7] == pytest.approx(-1 / np.sqrt(1.08), abs=1e-6)
        assert camera_is_upside_down(world.data, corner) and not camera_is_upside_down(world.data, topview)
        with mujoco.Renderer(world.model, 32, 32) as renderer:
            renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False  # as the env renders
            renderer.update_scene(world.data, camera="corner")
            raw_corner = renderer.render().copy()
            renderer.update_scene(world.data, camera="topview")
            raw_top = renderer.render().copy()
        np.testing.assert_array_equal(obs["rgb_corner"][0].numpy(), raw_corner[::-1, ::-1])
        np.testing.assert_array_equal(obs["rgb_topview"][0].numpy(), raw_top)
        quarter = 32 // 4
        image = obs["rgb_corner"][0].numpy().astype(float)
        assert image[:quarter].mean() > image[-quarter:].mean(), "light floor above, dark table stand below"


def test_unknown_camera_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown MetaWorld camera"):
        _env(num_envs=1, cameras=["front"], image_size=16)
