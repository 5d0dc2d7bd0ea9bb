"""An inference worker: a policy that acts on batches of observations with synced weights."""

from __future__ import annotations

import gymnasium as gym
import torch

from vla_rl.distributed.weights import VersionedWeights
from vla_rl.envs.base import Observation
from vla_rl.policies import PolicyConfig, build_policy


class InferenceWorker(VersionedWeights):
    """Builds the policy ``cfg`` for the given spaces; ``act`` samples actions (no gradients)."""

    def __init__(
        self, cfg: PolicyConfig, observation_space: gym.spaces.Dict, action_space: gym.spaces.Box
    ) -> None:
        self.policy = build_policy(cfg, observation_space, action_space)
        self.policy.eval()

    @torch.no_grad()
    def act(self, obs: Observation, deterministic: bool = False) -> torch.Tensor:
        return self.policy.act(obs, deterministic=deterministic).action
