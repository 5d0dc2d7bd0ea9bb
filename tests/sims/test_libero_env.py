"""The LIBERO adapter (warm-up, images, proprio), its worker process and the episode bookkeeping.

LIBERO is not installed here (it needs its own environment), so these tests drive the real adapter
and worker process with ``FakeOffScreenRenderEnv``: a FAKE of ``libero.libero.envs.OffScreenRenderEnv``
with its documented interface (``seed``, ``reset``, ``set_init_state``, ``step`` returning
``(obs, reward, done, info)``, ``check_success``, ``close``; robosuite's observation keys) and
trivial dynamics whose numbers are easy to work out by hand:

* an initial state ``s`` puts the end effector at ``s[:3]``; each step moves it by ``0.01 * action[:3]``;
* the task succeeds (``done``, reward 1) once the end effector is 0.025 right of where it started;
* ``robot0_gripper_qpos`` reports (steps since the initial state, sum of the gripper actions);
* the rendered image is the scene ``SCENE`` upside down, as robosuite renders.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from vla_rl.sims.libero.client import WorkerError
from vla_rl.sims.libero.env import LiberoBatchedEnv, check_config
from vla_rl.sims.libero.worker import LiberoWorld, WorkerSpec

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import evaluation_env_config

IMAGE_SIZE = 4


def scene(height: int, width: int) -> np.ndarray:
    """The fake's camera view the right way up: table in the lower half, a marker on the left edge."""
    image = np.zeros((height, width, 3), dtype=np.uint8)
    image[height // 2 :] = 200
    image[:, 0] = 255
    return image


SCENE = scene(IMAGE_SIZE, IMAGE_SIZE)
INIT_STATES = np.array([[0.1 * k, 0.5, 1.0] for k in range(5)])
"""Five initial states; the end effector's x (0.0 ... 0.4) tells which one a world started from."""
QUARTER_TURN_Z = np.array([0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4)])


class FakeOffScreenRenderEnv:
    """FAKE LIBERO env (see the module docstring)."""

    def __init__(
        self,
        bddl_file_name: str,
        camera_names=("agentview",),
        camera_heights=128,
        camera_widths=128,
        **kwargs,
    ) -> None:
        self.camera_names = list(camera_names)
        self.rendered = scene(camera_heights, camera_widths)[::-1].copy()  # upside down, as OpenGL
        self.seeds: list[int] = []
        self.actions: list[np.ndarray] = []
        self.closed = False
        # robosuite's robots, as far as the worker touches them (it clears the gripper's integrated command).
        self.robots = [SimpleNamespace(gripper=SimpleNamespace(current_action=np.ones(2)))]
        self.set_init_state(INIT_STATES[0])

    def seed(self, seed: int) -> None:
        self.seeds.append(seed)

    def reset(self) -> dict:
        return self._obs()

    def set_init_state(self, state: np.ndarray) -> dict:
        self.eef = np.array(state[:3], dtype=np.float64)
        self.start_x = self.eef[0]
        self.steps = 0
        self.gripper_sum = 0.0
        return self._obs()

    def check_success(self) -> bool:
        return bool(self.eef[0] >= self.start_x + 0.025)

    def step(self, action: np.ndarray):
        self.actions.append(np.array(action))
        self.steps += 1
        self.gripper_sum += float(action[6])
        self.eef = self.eef + 0.01 * np.asarray(action[:3])
        done = self.check_success()
        return self._obs(), float(done), done, {}

    def close(self) -> None:
        self.closed = True

    def _obs(self) -> dict:
        obs = {
            "robot0_eef_pos": self.eef.copy(),
            "robot0_eef_quat": QUARTER_TURN_Z,
            "robot0_gripper_qpos": np.array([self.steps, self.gripper_sum]),
        }
        for camera in self.camera_names:
            obs[f"{camera}_image"] = self.rendered.copy()
        return obs


def fake_opener(spec: WorkerSpec) -> list[LiberoWorld]:
    """Stands in for ``worker.open_libero_worlds`` in the worker process."""
    if "broken" in spec.cameras:
        raise RuntimeError("the fake cannot render camera 'broken'")
    return [
        LiberoWorld(
            FakeOffScreenRenderEnv(
                bddl_file_name=f"{spec.suite}_{task}.bddl",
                camera_names=spec.cameras,
                camera_heights=spec.image_size,
                camera_widths=spec.image_size,
            ),
            INIT_STATES,
            f"fake task {task}",
            spec,
        )
        for task in spec.task_ids
    ]


def _spec(**overrides) -> WorkerSpec:
    fields = dict(
        suite="libero_spatial",
        task_ids=(0,),
        cameras=("agentview",),
        image_size=IMAGE_SIZE,
        warmup_steps=10,
        image_orientation="upright",
        assets_dir="/unused",
    )
    return WorkerSpec(**{**fields, **overrides})


def _make_env(num_envs: int = 3, **options) -> LiberoBatchedEnv:
    cfg = EnvConfig(
        backend="libero",
        task="libero_spatial",
        num_envs=num_envs,
        max_episode_steps=4,
        cameras=["agentview"],
        image_size=IMAGE_SIZE,
        options={"warmup_steps": 2, **options},
    )
    return LiberoBatchedEnv(cfg, assets_dir=Path("/unused"), opener=fake_opener)


@pytest.fixture(scope="module")
def env():
    environment = _make_env()
    yield environment
    environment.close()


# ------------------------------------------------------------------ one world, in this process
def test_world_reset_seeds_sets_the_init_state_and_warms_up_with_noops():
    world = fake_opener(_spec())[0]
    obs = world.reset(init_index=3, env_seed=42)
    assert world.env.seeds == [42]
    assert world.env.robots[0].gripper.current_action.tolist() == [0, 0]  # cleared, as a hard reset does
    assert len(world.env.actions) == 10
    assert all(a.tolist() == [0, 0, 0, 0, 0, 0, -1] for a in world.env.actions)
    # proprio: eef position (init state 3, not moved by no-ops), axis-angle, (10 steps, 10 x -1)
    np.testing.assert_allclose(obs["proprio"], [0.3, 0.5, 1.0, 0, 0, math.pi / 2, 10, -10], atol=1e-6)
    assert obs["proprio"].dtype == np.float32
    assert np.array_equal(obs["rgb_agentview"], SCENE)


def test_world_warmup_count_and_orientation_are_configurable():
    world = fake_opener(_spec(warmup_steps=0, image_orientation="rotate180"))[0]
    obs = world.reset(init_index=0, env_seed=0)
    assert world.env.actions == [] and obs["proprio"][6] == 0
    assert np.array_equal(obs["rgb_agentview"], SCENE[:, ::-1])


# ------------------------------------------------------------------ N worlds in the worker process
def test_reset_gives_each_world_its_task_warmed_up_and_upright(env):
    obs, _ = env.reset(seed=0)
    assert obs["instruction"] == ["fake task 0", "fake task 1", "fake task 2"]  # suite tasks in turn
    assert obs["proprio"].shape == (3, 8) and obs["proprio"].dtype == torch.float32
    assert obs["proprio"][:, 6].tolist() == [2, 2, 2] and obs["proprio"][:, 7].tolist() == [-2, -2, -2]
    assert obs["rgb_agentview"].dtype == torch.uint8
    assert all(np.array_equal(image.numpy(), SCENE) for image in obs["rgb_agentview"])
    assert env.max_episode_steps == 4 and env.action_dim == 7 and env.control_hz == 20.0


def test_success_terminates_time_limit_truncates_and_both_autoreset(env):
    obs, _ = env.reset(seed=0)
    start_x = obs["proprio"][:, 0].clone()
    action = torch.zeros(3, 7)
    action[0, 0] = 5.0  # clipped to 1: world 0 moves 0.01 right per step and succeeds at step 3
    for _ in range(2):
        result = env.step(action)
        assert not result.done.any() and not result.info["success"].any() and "episode" not in result.info
    assert torch.allclose(result.obs["proprio"][0, 0], start_x[0] + 0.02)

    result = env.step(action)
    assert result.terminated.tolist() == [True, False, False] and not result.truncated.any()
    assert result.info["success"].tolist() == [True, False, False] and result.reward.tolist() == [1, 0, 0]
    episode = result.info["episode"]
    assert episode["length"][0] == 3 and episode["return"][0] == 1.0 and episode["success_once"][0]
    final = result.info["final_obs"]
    assert torch.allclose(final["proprio"][0, 0], start_x[0] + 0.03) and final["proprio"][0, 6] == 2 + 3
    assert result.obs["proprio"][0, 6] == 2, "world 0 must start a new (warmed-up) episode"
    assert torch.equal(final["proprio"][1:], result.obs["proprio"][1:]), "unfinished worlds: final_obs == obs"

    result = env.step(torch.zeros(3, 7))
    assert result.truncated.tolist() == [False, True, True] and not result.terminated.any()
    assert result.info["episode"]["length"][1:].tolist() == [4, 4]
    assert result.info["episode"]["return"][1:].tolist() == [0, 0]
    assert result.obs["proprio"][:, 6].tolist() == [3, 2, 2]  # world 0: warm-up 2 + 1 step


def test_seeds_pick_the_initial_state_and_shared_seeds_start_alike(env):
    shared, _ = env.reset(seed=[env.world_seed(11, 0)] * 3)
    assert len(set(shared["proprio"][:, 0].tolist())) == 1
    assert torch.equal(env.reset(seed=11)[0]["proprio"][0], shared["proprio"][0])
    starts = {round(env.reset(seed=seed)[0]["proprio"][0, 0].item(), 3) for seed in range(12)}
    assert len(starts) > 1 and starts <= {0.0, 0.1, 0.2, 0.3, 0.4}

    before, _ = env.reset(seed=5)
    after, _ = env.reset(seed=[env.world_seed(11, 0)], env_ids=torch.tensor([1]))
    assert torch.equal(after["proprio"][[0, 2]], before["proprio"][[0, 2]])
    assert torch.equal(after["proprio"][1], shared["proprio"][1])


@pytest.mark.parametrize(
    ("first", "expected"),
    [
        (0, [[0.0, 0.1], [0.2, 0.3], [0.4, 0.0], [0.1, 0.2], [0.3, 0.4]]),
        (3, [[0.3, 0.4], [0.0, 0.1], [0.2, 0.3], [0.4, 0.0], [0.1, 0.2]]),
    ],
)
def test_protocol_order_plays_each_initial_state_of_a_task_in_turn_across_its_worlds(first, expected):
    """Two worlds on one task with the fake's five initial states (end-effector x = 0.1 * k): world 0
    plays states 0, 2, 4, 1, 3 and world 1 states 1, 3, 0, 2, 4, whatever the seed (from
    ``first_init_state`` 3: 3, 0, 2, 4, 1 and 4, 1, 3, 0, 2); a seeded reset starts over."""
    cfg = EnvConfig(
        backend="libero",
        task="libero_spatial/2",
        num_envs=2,
        max_episode_steps=2,
        cameras=["agentview"],
        image_size=IMAGE_SIZE,
        options={"warmup_steps": 0, "init_states": "protocol", "first_init_state": first},
    )
    env = LiberoBatchedEnv(cfg, assets_dir=Path("/unused"), opener=fake_opener)
    try:
        for seed in (7, 8):
            obs, _ = env.reset(seed=seed)
            starts = [obs["proprio"][:, 0].tolist()]
            for _ in range(4):
                env.step(torch.zeros(2, 7))
                starts.append(env.step(torch.zeros(2, 7)).obs["proprio"][:, 0].tolist())
            np.testing.assert_allclose(starts, expected, atol=1e-6)
    finally:
        env.close()


def test_evaluations_follow_the_protocol_unless_the_config_says_otherwise():
    cfg = EnvConfig(backend="libero", task="libero_goal", options={"warmup_steps": 5})
    assert evaluation_env_config(cfg).options == {"warmup_steps": 5, "init_states": "protocol"}
    chosen = dataclasses.replace(cfg, options={"init_states": "random"})
    assert evaluation_env_config(chosen).options == {"init_states": "random"}
    assert evaluation_env_config(EnvConfig(backend="mujoco", task="push")).options == {}
    with pytest.raises(ValueError, match="env.options.init_states"):
        check_config(dataclasses.replace(cfg, options={"init_states": "sequential"}))


def test_step_async_and_wait_and_action_checks(env):
    env.reset(seed=1)
    env.step_async(torch.zeros(3, 7))
    with pytest.raises(RuntimeError, match="between step_async"):
        env.reset(seed=1)
    assert env.step_wait().obs["proprio"][:, 6].tolist() == [3, 3, 3]
    with pytest.raises(ValueError, match=r"action must have shape \(3, 7\)"):
        env.step(torch.zeros(3, 6))


def test_worlds_split_over_workers_give_the_same_episodes():
    """Five worlds over two worker processes (worlds 0-2 and 3-4) step as one worker would:
    the same observations, rewards and ends, with partial resets landing on the right worlds."""
    trajectories = []
    for workers in (1, 2):
        env = _make_env(num_envs=5, workers=workers)
        try:
            obs, _ = env.reset(seed=4)
            record = [obs["proprio"].clone()]
            assert obs["instruction"][3] == "fake task 3"
            actions = torch.zeros(5, 7)
            actions[[0, 4], 0] = 1.0  # worlds 0 and 4 succeed at their third step, then reset alone
            for _ in range(4):
                step = env.step(actions)
                record += [step.obs["proprio"].clone(), step.reward.clone(), step.done.clone()]
            assert step.info["episode"]["length"].tolist() == [1, 4, 4, 4, 1]
            record.append(env.reset(seed=[7], env_ids=torch.tensor([3]))[0]["proprio"].clone())
        finally:
            env.close()
        trajectories.append(record)
    for one, two in zip(*trajectories, strict=True):
        assert torch.equal(one, two)


def test_worker_failures_surface_with_their_cause():
    cfg = EnvConfig(
        backend="libero", task="libero_goal/1", num_envs=1, cameras=["broken"], image_size=IMAGE_SIZE
    )
    with pytest.raises(WorkerError, match="the fake cannot render camera 'broken'"):
        LiberoBatchedEnv(cfg, assets_dir=Path("/unused"), opener=fake_opener)

    env = _make_env()
    try:
        env.reset(seed=0)
        os.kill(env._workers._clients[0]._process.pid, signal.SIGKILL)
        with pytest.raises(WorkerError, match="exited unexpectedly"):
            env.step(torch.zeros(3, 7))
    finally:
        env.close()


def test_close_stops_the_worker_process():
    env = _make_env()
    workers = env._workers
    assert workers.alive
    env.close()
    assert not workers.alive
    env.close()  # closing twice is harmless
