"""Diagonal-Gaussian actor-critic: the sampling and scoring shared by the MLP and CNN policies."""

from __future__ import annotations

import math
from abc import abstractmethod

import gymnasium as gym
import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.base import ActorCriticPolicy, PolicyStep

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
ACTOR_OUT_GAIN = 0.01
"""Small last-layer gain: initial action means near zero, so exploration starts from the noise."""
CRITIC_OUT_GAIN = 1.0


def gaussian_log_prob(action: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Log-density of a diagonal Gaussian, summed over the action dimension -> [N]."""
    z = (action - mean) / std
    return (-0.5 * z.square() - std.log() - LOG_SQRT_2PI).sum(dim=-1)


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian, summed over the action dimension -> [N]."""
    return (0.5 + LOG_SQRT_2PI + std.log()).sum(dim=-1)


class GaussianActorCritic(ActorCriticPolicy):
    """Action ~ N(actor(features), diag(exp(log_std))^2) with a state-independent ``log_std``.

    Subclasses provide ``actor_mean`` and ``get_value``; everything probabilistic lives here.
    """

    def __init__(self, action_space: gym.spaces.Box, init_log_std: float) -> None:
        super().__init__()
        if len(action_space.shape) != 1:
            raise ValueError(f"action space must be 1-D, got shape {action_space.shape}")
        self.action_dim = int(action_space.shape[0])
        self.log_std = nn.Parameter(torch.full((self.action_dim,), float(init_log_std)))

    @abstractmethod
    def actor_mean(self, obs: Observation) -> torch.Tensor:
        """[N, A] mean action."""

    def mean_and_value(self, obs: Observation) -> tuple[torch.Tensor, torch.Tensor]:
        """Both heads at once; policies with a shared encoder override this to encode once."""
        return self.actor_mean(obs), self.get_value(obs)

    def act(self, obs: Observation, deterministic: bool = False) -> PolicyStep:
        mean, value = self.mean_and_value(obs)
        std = self.log_std.exp().expand_as(mean)
        action = mean if deterministic else mean + std * torch.randn_like(mean)
        return PolicyStep(
            action=action, log_prob=gaussian_log_prob(action, mean, std), value=value, mean=mean, std=std
        )

    def evaluate(
        self, obs: Observation, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        mean, value = self.mean_and_value(obs)
        std = self.log_std.exp().expand_as(mean)
        return gaussian_log_prob(action, mean, std), gaussian_entropy(std), value, mean, std
