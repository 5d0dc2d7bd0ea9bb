"""Deterministic stand-ins for an environment and a policy, for hand-checkable rollouts."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs.base import BatchedEnv, StepResult
from vla_rl.policies.base import ActorCriticPolicy, PolicyStep
from vla_rl.policies.config import PolicyConfig


class CountingEnv(BatchedEnv):
    """Observation = steps taken in the episode; reward 1 per step; episodes last 2 steps.

    World 0 is cut by a time limit (truncated), world 1 reaches a terminal state.
    """

    def __init__(self) -> None:
        self.num_envs = 2
        self.device = torch.device("cpu")
        self.observation_space = gym.spaces.Dict({"proprio": gym.spaces.Box(-np.inf, np.inf, (1,))})
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,))
        self.max_episode_steps = 2
        self.control_hz = 10.0
        self.count = torch.zeros(2)
        self.actions: list[torch.Tensor] = []

    def _obs(self) -> dict:
        return {"proprio": self.count.clone().unsqueeze(-1)}

    def reset(self, seed=None, env_ids=None):
        self.count.zero_()
        return self._obs(), {}

    def step(self, action: torch.Tensor) -> StepResult:
        self.actions.append(action.clone())
        self.count += 1
        ended = self.count >= 2
        final_obs = self._obs()
        self.count[ended] = 0
        info = {"success": torch.tensor([False, True]) & ended, "final_obs": final_obs}
        if ended.any():
            info["episode"] = {
                "return": torch.full((2,), 2.0),
                "length": torch.full((2,), 2),
                "success": torch.tensor([False, True]),
                "success_once": torch.tensor([False, True]),
            }
        return StepResult(
            obs=self._obs(),
            reward=torch.ones(2),
            terminated=torch.tensor([False, True]) & ended,
            truncated=torch.tensor([True, False]) & ended,
            info=info,
        )


class LinearValuePolicy(ActorCriticPolicy):
    """V(obs) = 10 * proprio[0]; actions are a fixed 3.0 (outside [-1, 1] to test clipping)."""

    def __init__(self) -> None:
        super().__init__(PolicyConfig(actor_obs_keys=[]), gym.spaces.Dict(), gym.spaces.Box(-1, 1, (1,)))
        self.normalizer_updates = 0

    def get_value(self, obs):
        return 10.0 * obs["proprio"][:, 0]

    def act(self, obs, deterministic=False):
        n = obs["proprio"].shape[0]
        action = torch.full((n, 1), 3.0)
        return PolicyStep(action, torch.zeros(n), self.get_value(obs), action.clone(), torch.ones(n, 1))

    def mean_and_value(self, obs):
        raise NotImplementedError

    def update_normalizer(self, obs):
        self.normalizer_updates += 1
