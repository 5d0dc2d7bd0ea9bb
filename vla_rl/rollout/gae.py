"""Generalised advantage estimation (Schulman et al., 2016)."""

from __future__ import annotations

import torch


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_value: torch.Tensor,
    gamma: float | torch.Tensor,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns ([T, N] each) of a rollout.

    ``gamma`` is a float, or a [T, N] tensor of per-step discounts: an action chunk that executed
    ``k`` control steps discounts its successor by ``gamma ** k`` (see ``chunk_rewards``).

    ``dones[t]`` marks that the episode ended with the transition at step ``t``, so step
    ``t + 1`` belongs to a new episode and is not bootstrapped from:
    ``delta_t = r_t + gamma * (1 - done_t) * V_{t+1} - V_t`` and
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``, with ``V_T = last_value``.
    Time-limit truncations are handled by the caller folding ``gamma * V(final_obs)`` into
    the reward and marking the step done. Returns are ``A_t + V_t`` (the critic's targets).
    """
    num_steps = rewards.shape[0]
    discounts = torch.as_tensor(gamma, dtype=rewards.dtype, device=rewards.device).expand_as(rewards)
    not_done = 1.0 - dones.to(rewards.dtype)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(last_value, dtype=rewards.dtype)
    next_value = last_value.to(rewards.dtype)
    for t in reversed(range(num_steps)):
        delta = rewards[t] + discounts[t] * not_done[t] * next_value - values[t]
        next_advantage = delta + discounts[t] * lam * not_done[t] * next_advantage
        advantages[t] = next_advantage
        next_value = values[t]
    return advantages, advantages + values


def chunk_rewards(
    step_rewards: torch.Tensor, executed: torch.Tensor, gamma: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-chunk rewards and discounts for GAE over action chunks.

    ``step_rewards`` [T, N, H] are the rewards of the H control steps each chunk could execute and
    ``executed`` (bool, same shape) marks the steps it did execute (an episode can end mid-chunk).
    Returns ``(reward [T, N], discount [T, N])``: ``sum_j gamma^j r_j`` over the executed steps and
    ``gamma ** (number executed)``, so one chunk is one step of a semi-MDP.
    """
    horizon = step_rewards.shape[-1]
    powers = gamma ** torch.arange(horizon, dtype=step_rewards.dtype, device=step_rewards.device)
    mask = executed.to(step_rewards.dtype)
    reward = (step_rewards * mask * powers).sum(dim=-1)
    discount = gamma ** mask.sum(dim=-1)
    return reward, discount
