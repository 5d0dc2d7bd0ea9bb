"""The learning parts of a run: the policy's initial noise is in the env's own action units."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch

from vla_rl.config import compose_train_config
from vla_rl.envs import make_env
from vla_rl.envs.gym_adapter import GymnasiumBatchedEnv
from vla_rl.training.components import build_learner, build_training_components


class TwoBoundsEnv(gym.Env):
    """A 2-D action with bounds [-2, 2] and [0, 0.5] (half ranges 2 and 0.25); nothing else matters."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 0.5], np.float32))

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


def test_a_rescaled_env_starts_each_dimension_at_one_unit_of_its_own_action() -> None:
    env = GymnasiumBatchedEnv(lambda: gym.wrappers.TimeLimit(TwoBoundsEnv(), 5), num_envs=2)
    np.testing.assert_array_equal(env.action_scale, [2.0, 0.25])
    cfg = compose_train_config(["policy.init_log_std=0.5", "algorithm.num_steps=4"])
    policy, _, _ = build_learner(
        cfg, env.observation_space, env.action_space, env.num_envs, action_scale=env.action_scale
    )
    # log std = 0.5 - log(half range): 0.5 - 0.6931 = -0.1931 and 0.5 + 1.3863 = 1.8863, so the
    # std in the env's units is exp(0.5) = 1.6487 for both dimensions.
    torch.testing.assert_close(policy.log_std.detach(), torch.tensor([-0.19315, 1.88629]), atol=1e-5, rtol=0)
    env_std = policy.log_std.detach().exp() * torch.tensor([2.0, 0.25])
    torch.testing.assert_close(env_std, torch.full((2,), math.exp(0.5)))


def test_a_built_in_task_keeps_the_configured_log_std() -> None:
    cfg = compose_train_config(["policy.init_log_std=-0.3", "env.num_envs=2", "algorithm.num_steps=4"])
    env = make_env(cfg.env)
    try:
        assert env.action_scale is None
        policy = build_training_components(cfg, env).policy
        assert torch.equal(policy.log_std.detach(), torch.full((env.action_dim,), -0.3))
    finally:
        env.close()
