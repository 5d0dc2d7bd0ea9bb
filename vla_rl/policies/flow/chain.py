"""Denoising chains of flow policies: the time grid, Euler(-Maruyama) steps and chain log-probabilities.

Convention (pi0's): time runs from ``t = 1`` (pure noise) to ``t = 0`` (action) in ``K`` equal steps
``dt = -1 / K``, ``t_k = 1 + k * dt``, and the network predicts the velocity ``v = noise - action`` of
the straight path ``x_t = t * noise + (1 - t) * action``.

A deterministic ODE sample has no likelihood. For RL the chain is made stochastic: each step is
``x_{k+1} = x_k + v(x_k, t_k) * dt + sigma_k * eps_k`` with ``eps_k ~ N(0, I)``, so every transition is a
Gaussian with mean ``mu_k = x_k + v dt`` and standard deviation ``sigma_k``. The log-probability of a
chain given its start ``x_0`` is the sum of the transition log-densities; ``x_0 ~ N(0, I)`` does not
depend on the parameters and is left out. ``sigma_k = noise_level * temperature * sqrt(|dt|)`` (the
Brownian scaling: the total injected variance is ``(noise_level * temperature)^2`` whatever ``K``).
"""

from __future__ import annotations

import math

import torch

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def denoising_times(num_steps: int) -> torch.Tensor:
    """float32 [K + 1]: ``t_k = 1 + k * dt`` for k = 0..K (the times of x_0 ... x_K)."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    dt = step_size(num_steps)
    return torch.tensor([1.0 + k * dt for k in range(num_steps + 1)], dtype=torch.float32)


def step_size(num_steps: int) -> float:
    """``dt = -1 / K`` (negative: time decreases from noise to action)."""
    return -1.0 / num_steps


def transition_std(num_steps: int, noise_level: float, temperature: float = 1.0) -> float:
    """``sigma = noise_level * temperature * sqrt(1 / K)``, the same at every step."""
    if noise_level <= 0.0 or temperature <= 0.0:
        raise ValueError(
            f"the chain log-prob needs noise_level > 0 and temperature > 0, got {noise_level}, {temperature}"
        )
    return noise_level * temperature * math.sqrt(1.0 / num_steps)


def euler_mean(x: torch.Tensor, velocity: torch.Tensor, dt: float) -> torch.Tensor:
    """Mean of the next state: one Euler step ``x + v * dt``."""
    return x + velocity * dt


def transition_log_prob(
    x_next: torch.Tensor, mean: torch.Tensor, std: float, dim_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Log N(x_next; mean, std^2 I) of one transition, summed over all but the batch dim -> [N].

    ``dim_mask`` (bool, broadcastable to ``x_next``) keeps only the entries that count, e.g. the
    real action dims of a chunk padded to ``max_action_dim``.
    """
    z = (x_next - mean) / std
    per_entry = -0.5 * z.square() - math.log(std) - LOG_SQRT_2PI
    if dim_mask is not None:
        per_entry = per_entry * dim_mask.to(per_entry.dtype)
    return per_entry.flatten(1).sum(dim=1)


def chain_log_prob(
    chain: torch.Tensor, means: torch.Tensor, std: float, dim_mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Sum of transition log-densities of a chain -> [N].

    ``chain`` [N, K + 1, ...] holds x_0 ... x_K; ``means`` [N, K, ...] holds mu_0 ... mu_{K-1}, the
    means of x_1 ... x_K (differentiable: recomputed from the network for PPO ratios). ``dim_mask``
    broadcasts against the trailing dims (e.g. bool [max_action_dim]).
    """
    if chain.shape[1] != means.shape[1] + 1:
        raise ValueError(f"chain has {chain.shape[1]} states but means {means.shape[1]} transitions")
    return transition_log_prob(chain[:, 1:], means, std, dim_mask)


def chain_entropy(num_steps: int, std: float, entries_per_step: int) -> float:
    """Entropy of the Gaussian transitions of a chain (a constant of ``std``, for logging)."""
    return num_steps * entries_per_step * (0.5 + LOG_SQRT_2PI + math.log(std))


def sample_transition(mean: torch.Tensor, std: float, deterministic: bool) -> torch.Tensor:
    """``mean + std * eps`` (or ``mean`` when deterministic)."""
    if deterministic:
        return mean
    return mean + std * torch.randn_like(mean)
