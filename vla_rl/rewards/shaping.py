"""What a step pays the learner: the env's reward or success flag, potential-based shaping and the
weighted sum of env and model rewards."""

from __future__ import annotations

from collections.abc import Callable

import torch

from vla_rl.envs.base import StepResult

REWARDS: dict[str, Callable[[StepResult], torch.Tensor]] = {
    "dense": lambda result: result.reward,
    "success": lambda result: result.info["success"],
}
"""What a step pays the learner (``algorithm.reward`` of a chunk RL run): the task's (shaped)
reward or its success flag."""


def potential_shaping(phi: torch.Tensor, phi_next: torch.Tensor, gamma: float) -> torch.Tensor:
    """``gamma * phi(s') - phi(s)`` (Ng, Harada and Russell 1999).

    Over an episode s_0 .. s_T the terms sum to ``sum_t gamma^t (gamma phi_{t+1} - phi_t)``, which
    telescopes to ``gamma^T phi(s_T) - phi(s_0)``: with gamma 1, ``phi(final) - phi(initial)``. A
    policy's return changes by a quantity that depends on the start state only, so the optimal
    policy does not change.
    """
    return gamma * phi_next - phi


def combine_rewards(
    env_reward: torch.Tensor,
    model_term: torch.Tensor,
    env_weight: float,
    model_weight: float,
    success_probability: torch.Tensor | None = None,
    success_bonus: float = 0.0,
    success_threshold: float = 0.5,
) -> torch.Tensor:
    """``env_weight * r_env + model_weight * r_model``, plus ``success_bonus`` where the model's
    success probability reaches ``success_threshold``."""
    reward = env_weight * env_reward + model_weight * model_term
    if success_bonus and success_probability is not None:
        reward = reward + success_bonus * (success_probability >= success_threshold).to(reward.dtype)
    return reward
