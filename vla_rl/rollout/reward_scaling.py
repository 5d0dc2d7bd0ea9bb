"""Rewards divided by a running standard deviation of the discounted return, so a critic fits values
of order one whatever the env's reward scale (a Gymnasium env's returns may be in the hundreds).

Each world keeps its discounted return ``G <- gamma * G + r`` (reset to 0 after an episode ends);
every step's ``G`` of every world updates a running variance, and the reward stored for training is
``r / sqrt(var(G) + epsilon)``, clipped to [-clip, clip] (a single world's first steps have almost
no variance yet). Nothing is subtracted, so the sign of every reward is kept. The same remedy as
SB3's ``VecNormalize(norm_reward=True)`` and gymnasium's ``NormalizeReward`` wrapper.
"""

from __future__ import annotations

from typing import Any

import torch

from vla_rl.policies.normalizer import RunningMeanStd


class RewardScaler:
    """Scales the rewards of ``num_envs`` worlds by the running std of their discounted returns."""

    def __init__(self, num_envs: int, gamma: float, epsilon: float = 1e-8, clip: float = 10.0) -> None:
        self.gamma = gamma
        self.epsilon = epsilon
        """Added to the variance before the square root."""
        self.clip = clip
        """Scaled rewards are clipped to [-clip, clip]."""
        self.discounted_return = torch.zeros(num_envs, dtype=torch.float64)
        """Each world's ``G`` so far in its current episode."""
        self.return_stats = RunningMeanStd(())

    def __call__(self, reward: torch.Tensor, done: torch.Tensor, rows: Any = slice(None)) -> torch.Tensor:
        """The scaled rewards of worlds ``rows`` for one step (``done``: their episodes ended)."""
        g = self.discounted_return[rows] * self.gamma + reward.detach().cpu().double()
        self.return_stats.update(g)
        self.discounted_return[rows] = torch.where(done.cpu(), 0.0, g)
        std = torch.sqrt(self.return_stats.var + self.epsilon)
        return (reward / std.to(reward.dtype).to(reward.device)).clamp(-self.clip, self.clip)

    def state_dict(self) -> dict[str, Any]:
        return {
            "discounted_return": self.discounted_return.clone(),
            "return_stats": self.return_stats.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.discounted_return = state["discounted_return"].clone()
        self.return_stats.load_state_dict(state["return_stats"])
