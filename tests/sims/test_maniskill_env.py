"""The maniskill adapter's own logic (observation mapping, action rescaling, autoreset with final
observations, per-world seeding, instructions), checked against a FAKE ManiSkill env.

SAPIEN cannot create any ManiSkill environment without an NVIDIA GPU and its Vulkan driver, so
``FakeManiSkillEnv`` stands in for ``gym.make(task, num_envs=N, sim_backend="gpu", ...)``. It
follows ManiSkill3's documented batched API: torch tensors with the batch first, nested
``agent`` / ``extra`` / ``sensor_data`` observations written into reused buffers,
``reset(seed=..., options={"env_idx": ...})`` that seeds torch with the first seed only,
``terminated`` = ``info["success"]``, and a time limit read from ``elapsed_steps``. The last test
runs the real simulator and skips where it cannot.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from vla_rl.sims.maniskill.backend import unavailable_reason
from vla_rl.sims.maniskill.batched_env import ManiSkillBatchedEnv
from vla_rl.sims.maniskill.observations import ObservationLayout, camera_rgb, flatten_batched

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env

N = 3


class FakeManiSkillEnv:
    """FAKE ManiSkill env (see the module docstring). A point robot at ``qpos = (x, y)`` moves by
    the first two action entries; success is ``x > 0.25``; reward is ``x``."""

    success_x = 0.25

    def __init__(self, image_hw: int = 4, max_episode_steps: int = 50) -> None:
        self.num_envs, self.device, self.control_freq = N, torch.device("cpu"), 20
        low, high = np.array([-0.1, -0.1, -1.0], np.float32), np.array([0.1, 0.1, 1.0], np.float32)
        self.single_action_space = gym.spaces.Box(low, high)
        self.max_episode_steps = max_episode_steps
        self._qpos, self._qvel = torch.zeros(N, 2), torch.zeros(N, 2)
        self._rgb = torch.zeros(N, image_hw, image_hw, 3, dtype=torch.uint8)
        self.elapsed_steps = torch.zeros(N, dtype=torch.long)
        self.episodes = torch.zeros(N, dtype=torch.long)
        self._rng = torch.Generator().manual_seed(2022)
        self.reset_calls: list[tuple[object, list[int]]] = []
        self.last_action: torch.Tensor | None = None
        self.closed = False

    @property
    def unwrapped(self) -> FakeManiSkillEnv:
        return self

    def get_obs(self) -> dict:
        self._rgb[:] = (self._qpos[:, :1] * 100).round().to(torch.uint8).view(N, 1, 1, 1)
        return {  # the buffers themselves, as ManiSkill returns views of its GPU buffers
            "agent": {"qpos": self._qpos, "qvel": self._qvel},
            "extra": {"goal_x": torch.full((N, 1), self.success_x), "is_grasped": self._qpos[:, 1] > 0.05},
            "sensor_param": {"cam": {"intrinsic_cv": torch.eye(3).expand(N, 3, 3)}},
            "sensor_data": {"cam": {"rgb": self._rgb, "segmentation": torch.zeros(N, 4, 4, 1)}},
        }

    def reset(self, seed=None, options=None):
        env_idx = torch.as_tensor((options or {}).get("env_idx", torch.arange(N))).long()
        self.reset_calls.append((seed, env_idx.tolist()))
        if seed is not None:
            self._rng = torch.Generator().manual_seed(int(np.atleast_1d(seed)[0]))
        self._qpos[env_idx] = torch.randint(0, 5, (len(env_idx), 2), generator=self._rng) / 100
        self._qvel[env_idx] = 0.0
        self.elapsed_steps[env_idx] = 0
        self.episodes[env_idx] += 1
        return self.get_obs(), {"reconfigure": False}

    def step(self, action: torch.Tensor):
        self.last_action = action.clone()
        self._qvel[:] = action[:, :2]
        self._qpos += action[:, :2]
        self.elapsed_steps += 1
        success = self._qpos[:, 0] > self.success_x
        truncated = self.elapsed_steps >= self.max_episode_steps
        return self.get_obs(), self._qpos[:, 0].clone(), success.clone(), truncated, {"success": success}

    def get_language_instruction(self) -> list[str]:
        return [f"episode {int(k)}" for k in self.episodes]

    def close(self) -> None:
        self.closed = True


def _env(fake: FakeManiSkillEnv | None = None, **kwargs) -> ManiSkillBatchedEnv:
    layout = ObservationLayout(cameras=("cam",), image_size=4, privileged=True)
    args = {"layout": layout, "instruction": "move right", "max_episode_steps": 5, **kwargs}
    return ManiSkillBatchedEnv(fake or FakeManiSkillEnv(), **args)


def test_actions_are_clipped_and_rescaled_to_the_env_bounds():
    fake = FakeManiSkillEnv()
    env = _env(fake)
    env.step(torch.tensor([[-1.0, 0.0, 1.0], [1.0, -0.5, 2.0], [0.5, 0.5, -3.0]]))
    expected = torch.tensor([[-0.1, 0.0, 1.0], [0.1, -0.05, 1.0], [0.05, 0.05, -1.0]])
    torch.testing.assert_close(fake.last_action, expected)
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(N, 2))


def test_observation_holds_proprio_privileged_state_images_and_instruction():
    env = _env()
    obs = env.step(torch.tensor([[1.0, 1.0, 0.0]] * N)).obs
    qpos = obs["proprio"][:, :2]
    torch.testing.assert_close(obs["proprio"][:, 2:], torch.full((N, 2), 0.1))
    assert (qpos[:, 1] >= 0.1).all(), "start y >= 0 plus one step of 0.1: is_grasped (y > 0.05) holds"
    # privileged: agent (qpos, qvel) then extra (goal_x, is_grasped as 0/1)
    expected = torch.cat([obs["proprio"], torch.full((N, 1), 0.25), torch.ones(N, 1)], dim=1)
    torch.testing.assert_close(obs["privileged"], expected)
    assert obs["rgb_cam"].dtype == torch.uint8 and tuple(obs["rgb_cam"].shape) == (N, 4, 4, 3)
    assert torch.equal(obs["rgb_cam"][:, 0, 0, 0], (qpos[:, 0] * 100).round().to(torch.uint8))
    assert obs["instruction"] == ["move right"] * N
    assert set(env.observation_space.spaces) == {"proprio", "privileged", "rgb_cam", "instruction"}
    assert env.observation_space["privileged"].shape == (6,) and env.control_hz == 20.0


def test_flatten_follows_insertion_order_and_skips_empty_entries():
    tree = {"a": {"q": torch.tensor([[1.0, 2.0], [3.0, 4.0]])}, "b": torch.tensor([True, False]), "c": {}}
    torch.testing.assert_close(flatten_batched(tree, 2), torch.tensor([[1.0, 2.0, 1.0], [3.0, 4.0, 0.0]]))


def test_images_are_resized_without_flipping_and_floats_become_uint8():
    rows = torch.arange(8, dtype=torch.float32).mul(30).view(1, 8, 1, 1).expand(2, 8, 8, 3)
    resized = camera_rgb({"sensor_data": {"cam": {"rgb": rows.to(torch.uint8)}}}, "cam", 4)
    assert tuple(resized.shape) == (2, 4, 4, 3) and resized.dtype == torch.uint8
    assert (resized[:, 1:, 0, 0].int() > resized[:, :-1, 0, 0].int()).all(), "top row stays at the top"
    half = camera_rgb({"sensor_data": {"cam": {"rgb": torch.full((1, 4, 4, 4), 0.5)}}}, "cam", 4)
    assert half.shape[-1] == 3 and (half == 128).all()  # 0.5 * 255 = 127.5 rounds to 128
    with pytest.raises(ValueError, match="no RGB camera 'wrist'"):
        camera_rgb({"sensor_data": {"cam": {"rgb": rows}}}, "wrist", 4)


def test_a_success_ends_the_episode_and_autoresets_with_its_final_observation():
    fake = FakeManiSkillEnv()
    env = _env(fake, instruction=None)
    start, _ = env.reset()
    x0, y0 = start["proprio"][0, 0], start["proprio"][0, 1]
    assert start["instruction"] == ["episode 2"] * N  # one reset when built, one here
    action = torch.tensor([[1.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]])
    for _ in range(2):
        result = env.step(action)
        assert not result.done.any() and "episode" not in result.info
        assert all(
            torch.equal(v, result.obs[k]) for k, v in result.info["final_obs"].items() if k != "instruction"
        )
    result = env.step(action)  # x0 + 0.3 > 0.25 for world 0 only
    assert result.terminated.tolist() == [True, False, False] and not result.truncated.any()
    assert result.info["success"].tolist() == [True, False, False]
    final, obs = result.info["final_obs"], result.obs
    torch.testing.assert_close(
        final["proprio"][0], torch.stack([x0 + 0.3, y0 + 0.3, *[torch.tensor(0.1)] * 2])
    )
    assert float(obs["proprio"][0, 0]) < 0.05 and torch.equal(obs["proprio"][0, 2:], torch.zeros(2))
    assert int(final["rgb_cam"][0, 0, 0, 0]) == round(float(final["proprio"][0, 0]) * 100)
    assert int(obs["rgb_cam"][0, 0, 0, 0]) == round(float(obs["proprio"][0, 0]) * 100)
    for key in ("proprio", "privileged", "rgb_cam"):
        assert torch.equal(final[key][1:], obs[key][1:]), f"{key}: unfinished worlds copy obs"
    assert final["instruction"] == ["episode 2"] * N and obs["instruction"] == [
        "episode 3",
        "episode 2",
        "episode 2",
    ]
    assert fake.reset_calls[-1] == (None, [0]), "autoreset is one unseeded call for the finished worlds"
    episode = result.info["episode"]
    assert int(episode["length"][0]) == 3 and bool(episode["success"][0]) and bool(episode["success_once"][0])
    torch.testing.assert_close(episode["return"][0], 3 * x0 + 0.6)  # rewards x0+0.1, x0+0.2, x0+0.3


def test_time_limit_truncates_and_ignoring_terminations_keeps_episodes_running():
    env = _env(ignore_terminations=True)
    env.reset(seed=0)
    push = torch.tensor([[1.0, 0.0, 0.0]] * N)
    results = [env.step(push) for _ in range(5)]
    assert not any(r.done.any() for r in results[:4])
    assert results[2].info["success"].all(), "success is still reported at every step"
    assert results[4].truncated.all() and not results[4].terminated.any()
    episode = results[4].info["episode"]
    assert episode["length"].tolist() == [5] * N and episode["success_once"].all()


def test_worlds_given_one_seed_start_alike_although_the_simulator_seeds_per_call():
    fake = FakeManiSkillEnv()
    env = _env(fake)
    shared, _ = env.reset(seed=[env.world_seed(11, 0)] * N)
    assert all(torch.equal(shared["proprio"][i], shared["proprio"][0]) for i in range(N))
    seed = env.world_seed(11, 0)
    assert fake.reset_calls[-N:] == [([seed] * N, [i]) for i in range(N)]
    before, _ = env.reset(seed=5)
    after, _ = env.reset(seed=[seed], env_ids=torch.tensor([1]))
    assert torch.equal(after["proprio"][[0, 2]], before["proprio"][[0, 2]])
    assert torch.equal(after["proprio"][1], shared["proprio"][0])
    assert torch.equal(env.reset(seed=[[11, 0]] * N)[0]["proprio"], shared["proprio"])
    again, _ = env.reset(seed=5)
    assert torch.equal(again["proprio"], before["proprio"])
    seeds = {env.world_seed(s, w) for s in range(4) for w in range(4)}
    assert len(seeds) == 16 and all(0 <= s < 2**31 for s in seeds)


def test_reset_of_no_worlds_returns_the_current_observation_and_close_closes():
    fake = FakeManiSkillEnv()
    env = _env(fake)
    obs, _ = env.reset(seed=3)
    calls = len(fake.reset_calls)
    same, _ = env.reset(env_ids=torch.tensor([], dtype=torch.long))
    assert len(fake.reset_calls) == calls and torch.equal(same["proprio"], obs["proprio"])
    with pytest.raises(ValueError, match="2 seeds for 1 reset worlds"):
        env.reset(seed=[1, 2], env_ids=torch.tensor([0]))
    env.close()
    assert fake.closed


def test_a_missing_camera_is_a_config_error():
    layout = ObservationLayout(cameras=("wrist",), image_size=4, privileged=True)
    with pytest.raises(ValueError, match="env.cameras"):
        ManiSkillBatchedEnv(FakeManiSkillEnv(), layout=layout, instruction="x", max_episode_steps=5)


def test_real_pick_cube_seeds_worlds_alike_and_truncates_at_the_limit():
    """Runs ManiSkill itself; skips with the backend's reason where SAPIEN cannot run."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"maniskill: {reason}")
    cfg = EnvConfig(
        backend="maniskill", task="PickCube-v1", num_envs=4, max_episode_steps=3,
        cameras=["base_camera"], image_size=64, device="cuda",
    )  # fmt: skip
    with make_env(cfg) as env:
        obs, _ = env.reset(seed=[env.world_seed(1, 0)] * 4)
        assert torch.equal(obs["privileged"][0], obs["privileged"][3])
        assert obs["rgb_base_camera"].shape == (4, 64, 64, 3)
        assert obs["rgb_base_camera"].float().std() > 1.0
        for _ in range(3):
            result = env.step(torch.zeros(4, env.action_dim, device="cuda"))
        assert result.truncated.all() and result.info["episode"]["length"].tolist() == [3] * 4
