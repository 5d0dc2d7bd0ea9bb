"""Generalised advantage estimation (Schulman et al., 2016)."""

from __future__ import annotations

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns ([T, N] each) of a rollout.

    ``dones[t]`` marks that the episode ended with the transition at step ``t``, so step
    ``t + 1`` belongs to a new episode and is not bootstrapped from:
    ``delta_t = r_t + gamma * (1 - done_t) * V_{t+1} - V_t`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``, with ``V_T = last_value``.
    Time-limit truncations are handled by the caller folding ``gamma * V(final_obs)`` into
    the reward and marking the step done. Returns are ``A_t + V_t`` (the critic's targets).
    """
    num_steps = rewards.shape[0]
    not_done = 1.0 - dones.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(last_value, dtype=rewards.dtype)
    next_value = last_value.to(rewards.dtype)
    for t in reversed(range(num_steps)):
        delta = rewards[t] + gamma * not_done[t] * next_value - values[t]
        next_advantage = delta + gamma * lam * not_done[t] * next_advantage
        advantages[t] = next_advantage
        next_value = values[t]
    return advantages, advantages + values
