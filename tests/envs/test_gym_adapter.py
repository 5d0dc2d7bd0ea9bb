import gymnasium as gym
import numpy as np
import pytest
import torch

from vla_rl.envs import EnvConfig, make_env
from vla_rl.envs.gym_adapter import GymnasiumBatchedEnv


class CounterEnv(gym.Env):
    """Dict obs {"count": steps so far, "last_action"}; succeeds (and keeps going) at step 2."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {
                "count": gym.spaces.Box(0, 100, (1,), np.float32),
                "last_action": gym.spaces.Box(-10, 10, (1,), np.float32),
            }
        )
        self.action_space = gym.spaces.Box(-4.0, 2.0, (1,), np.float32)
        self.count = 0

    def _obs(self, action: float = 0.0) -> dict:
        return {"count": np.array([self.count], np.float32), "last_action": np.array([action], np.float32)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        return self._obs(), {}

    def step(self, action):
        self.count += 1
        return self._obs(float(action[0])), 1.0, False, False, {"is_success": self.count == 2}


def counter_env(num_envs: int = 2) -> GymnasiumBatchedEnv:
    return GymnasiumBatchedEnv(lambda: gym.wrappers.TimeLimit(CounterEnv(), 3), num_envs=num_envs)


def test_dict_spaces_map_key_by_key_and_actions_rescale_from_unit_box():
    env = counter_env()
    assert set(env.observation_space.spaces) == {"count", "last_action"}
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert env.max_episode_steps == 3
    env.reset(seed=0)
    result = env.step(torch.tensor([[-1.0], [0.5]]))
    # [-1, 1] -> [-4, 2]: -1 -> -4, 0.5 -> -4 + 1.5 * 3 = 0.5
    torch.testing.assert_close(result.obs["last_action"], torch.tensor([[-4.0], [0.5]]))
    assert result.reward.dtype == torch.float32 and result.terminated.dtype == torch.bool


def test_same_step_autoreset_final_obs_success_and_episode_stats():
    env = counter_env()
    obs, _ = env.reset(seed=0)
    zero = torch.zeros(2, 1)
    first = env.step(zero)
    assert "episode" not in first.info
    torch.testing.assert_close(first.info["final_obs"]["count"], first.obs["count"])
    second = env.step(zero)
    assert second.info["success"].tolist() == [True, True]
    third = env.step(zero)
    assert third.truncated.tolist() == [True, True] and not third.terminated.any()
    torch.testing.assert_close(third.obs["count"], torch.zeros(2, 1))  # already reset
    torch.testing.assert_close(third.info["final_obs"]["count"], torch.full((2, 1), 3.0))
    assert third.info["success"].tolist() == [False, False]
    episode = third.info["episode"]
    assert episode["return"].tolist() == [3.0, 3.0]
    assert episode["length"].tolist() == [3, 3]
    assert episode["success"].tolist() == [False, False]
    assert episode["success_once"].tolist() == [True, True]
    fourth = env.step(zero)
    torch.testing.assert_close(fourth.obs["count"], torch.ones(2, 1))


def test_partial_reset_only_touches_given_worlds():
    env = counter_env()
    env.reset(seed=0)
    env.step(torch.zeros(2, 1))
    obs, _ = env.reset(env_ids=torch.tensor([1]))
    assert obs["count"][:, 0].tolist() == [1.0, 0.0]
    result = env.step(torch.zeros(2, 1))
    assert result.obs["count"][:, 0].tolist() == [2.0, 1.0]


def test_pendulum_via_registry_box_obs_and_seeding_determinism():
    cfg = EnvConfig(backend="gymnasium", task="Pendulum-v1", num_envs=3)
    env = make_env(cfg)
    assert list(env.observation_space.spaces) == ["proprio"]
    assert env.max_episode_steps == 200
    a, _ = env.reset(seed=7)
    b, _ = env.reset(seed=7)
    c, _ = env.reset(seed=8)
    torch.testing.assert_close(a["proprio"], b["proprio"])
    assert not torch.equal(a["proprio"], c["proprio"])
    assert not torch.equal(a["proprio"][0], a["proprio"][1])  # per-world streams differ
    # seed s seeds world i with s + i, so world 1 of seed 7 equals world 0 of seed 8
    torch.testing.assert_close(a["proprio"][1], c["proprio"][0])
    same, _ = env.reset(seed=[5, 5, 5])
    torch.testing.assert_close(same["proprio"][0], same["proprio"][2])
    actions = torch.linspace(-1, 1, 3)[:, None]
    rewards = []
    for _ in range(2):
        env.reset(seed=7)
        rewards.append(torch.stack([env.step(actions).reward for _ in range(5)]))
    torch.testing.assert_close(rewards[0], rewards[1])
    assert a["proprio"].dtype == torch.float32
    assert env.observation_space["proprio"].dtype == np.float32


class Float64Env(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, seed=None, options=None):
        return np.full(2, 0.5), {}

    def step(self, action):
        return np.full(2, 0.25), 0.0, False, False, {}


def test_float64_observation_spaces_are_exposed_as_float32():
    env = GymnasiumBatchedEnv(Float64Env, num_envs=2)
    space = env.observation_space["proprio"]
    obs, _ = env.reset(seed=0)
    assert space.dtype == np.float32 and obs["proprio"].dtype == torch.float32
    assert space.contains(obs["proprio"][0].numpy())
    assert env.step(torch.zeros(2, 1)).obs["proprio"].dtype == torch.float32


def test_max_episode_steps_option_and_bad_construction():
    env = make_env(
        EnvConfig(backend="gymnasium", task="MountainCarContinuous-v0", num_envs=1, max_episode_steps=4)
    )
    env.reset(seed=0)
    dones = [bool(env.step(torch.zeros(1, 1)).truncated[0]) for _ in range(4)]
    assert dones == [False, False, False, True]
    with pytest.raises(ValueError, match="exactly one"):
        GymnasiumBatchedEnv()


class PixelEnv(gym.Env):
    """A Box RGB image observation whose pixels all hold the step count; ends after 2 steps."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (4, 5, 3), np.uint8)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.count = 0

    def _obs(self) -> np.ndarray:
        return np.full((4, 5, 3), self.count, np.uint8)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        return self._obs(), {}

    def step(self, action):
        self.count += 1
        return self._obs(), 0.0, self.count == 2, False, {}


def test_an_image_box_observation_is_a_camera_for_the_cnn():
    env = GymnasiumBatchedEnv(PixelEnv, num_envs=2)
    assert list(env.observation_space.spaces) == ["rgb_pixels"]
    assert env.observation_space["rgb_pixels"].dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs["rgb_pixels"].shape == (2, 4, 5, 3) and obs["rgb_pixels"].dtype == torch.uint8
    env.step(torch.zeros(2, 2))
    done = env.step(torch.zeros(2, 2))
    # Same-step autoreset: the returned images are the new episodes' (0), the final ones hold 2.
    assert int(done.obs["rgb_pixels"].max()) == 0
    assert int(done.info["final_obs"]["rgb_pixels"].min()) == 2
