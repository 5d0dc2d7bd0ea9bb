"""The actor-critic interface every policy implements (MLP, CNN and later VLA policies)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch
from torch import nn

from vla_rl.envs.base import Observation


@dataclass
class PolicyStep:
    """One forward pass of the policy on a batch of observations."""

    action: torch.Tensor
    """[N, A] sampled (or deterministic) action, before any clipping to the action bounds."""
    log_prob: torch.Tensor
    """[N] log-density of ``action`` under the policy's distribution."""
    value: torch.Tensor
    """[N] critic estimate of the state value."""
    mean: torch.Tensor
    """[N, A] mean of the diagonal Gaussian (kept for the KL of the adaptive learning rate)."""
    std: torch.Tensor
    """[N, A] standard deviation of the diagonal Gaussian."""


class ActorCriticPolicy(nn.Module, ABC):
    """A stochastic actor with a value head, trained by on-policy algorithms."""

    @abstractmethod
    def act(self, obs: Observation, deterministic: bool = False) -> PolicyStep:
        """Sample an action (the mean if ``deterministic``) with its log-prob and value."""

    @abstractmethod
    def evaluate(
        self, obs: Observation, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return ``(log_prob [N], entropy [N], value [N], mean [N, A], std [N, A])`` of given actions."""

    @abstractmethod
    def get_value(self, obs: Observation) -> torch.Tensor:
        """Critic estimate [N]."""

    def auxiliary_loss(self, obs: Observation) -> torch.Tensor | None:
        """A weighted loss the algorithm adds to its own for this minibatch, or None (the default).

        Called right after ``evaluate`` on the same ``obs``, so a policy may reuse the features
        that call computed."""
        return None

    def update_normalizer(self, obs: Observation) -> None:  # noqa: B027 - optional hook
        """Fold ``obs`` into running observation statistics; no-op when normalisation is off."""
