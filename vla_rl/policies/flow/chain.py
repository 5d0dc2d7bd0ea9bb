"""Denoising chains of flow policies: the time grid and the Euler step.

Convention (pi0's): time runs from ``t = 1`` (pure noise) to ``t = 0`` (action) in ``K`` equal steps
``dt = -1 / K``, ``t_k = 1 + k * dt``, and the network predicts the velocity ``v = noise - action`` of
the straight path ``x_t = t * noise + (1 - t) * action``.

A deterministic ODE sample has no likelihood; ``vla_rl.policies.flow.exploration`` makes the chain
stochastic for RL and computes its log-probability.
"""

from __future__ import annotations

import torch


def denoising_times(num_steps: int) -> torch.Tensor:
    """float32 [K + 1]: ``t_k = 1 + k * dt`` for k = 0..K (the times of x_0 ... x_K)."""
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    dt = step_size(num_steps)
    return torch.tensor([1.0 + k * dt for k in range(num_steps + 1)], dtype=torch.float32)


def step_size(num_steps: int) -> float:
    """``dt = -1 / K`` (negative: time decreases from noise to action)."""
    return -1.0 / num_steps


def euler_mean(x: torch.Tensor, velocity: torch.Tensor, dt: float) -> torch.Tensor:
    """Mean of the next state: one Euler step ``x + v * dt``."""
    return x + velocity * dt


def accumulated_denoising_times(num_steps: int) -> torch.Tensor:
    """float32 [K + 1]: ``t_0 = 1`` and ``t_{k+1} = t_k + dt`` summed in float32, as LeRobot's (and
    openpi's) sampling loop steps its time; it drifts from ``1 + k * dt`` by a few float32 roundings
    (0.79999995 for 0.8 at K = 10), which the high frequencies of pi0's time embedding notice."""
    dt = torch.tensor(step_size(num_steps), dtype=torch.float32)
    times = [torch.tensor(1.0, dtype=torch.float32)]
    for _ in range(num_steps):
        times.append(times[-1] + dt)
    return torch.stack(times)
