"""Flow-SDE: the deterministic denoising ODE of a flow policy turned into an SDE with exact likelihoods.

Time runs from ``t = 1`` (noise) to ``t = 0`` (action); a step goes from ``t`` to ``t - delta``. From
the predicted velocity ``v = noise - action`` the current state gives an estimate of both ends of the
straight path: ``action_hat = x_t - t v`` and ``noise_hat = x_t + (1 - t) v``. The ODE (Euler) step
lands on that path at ``t - delta``. The SDE with noise level ``a`` keeps the same marginals while
injecting Gaussian noise of scale ``sigma_t = a sqrt(t / (1 - t))`` (Flow-GRPO, pi_RL): its discrete
transition is Gaussian with

    mean = action_hat (1 - t + delta) + noise_hat (t - delta - sigma_t^2 delta / (2 t))
    std  = sigma_t sqrt(delta)

so the log-density of every denoising transition is exact. ``sigma_t`` has a pole at ``t = 1``; the
first step uses the second grid time instead. At ``a = 0`` the mean is the Euler step.

The two-layer-MDP variant makes one randomly chosen step per sample stochastic and the others ODE
steps; the sample's log-probability is that one transition's density.
"""

from __future__ import annotations

import math

import torch


def sde_sigma(t: float, noise_level: float, t_pole_cap: float) -> float:
    """``sigma_t = a sqrt(t / (1 - t))`` with ``t`` capped at ``t_pole_cap`` (< 1) to avoid the pole."""
    if not 0.0 < t_pole_cap < 1.0:
        raise ValueError(f"t_pole_cap must lie in (0, 1), got {t_pole_cap}")
    t = min(t, t_pole_cap)
    return noise_level * math.sqrt(t / (1.0 - t))


def sde_transition(
    x_t: torch.Tensor, velocity: torch.Tensor, t: float, delta: float, sigma: float
) -> tuple[torch.Tensor, float]:
    """Mean and standard deviation of ``x_{t - delta}`` given ``x_t`` and the velocity at ``t``.

    ``sigma`` is ``sde_sigma(t, ...)``; ``sigma = 0`` gives the Euler step ``x_t - delta v`` and a
    zero standard deviation.
    """
    if not 0.0 < delta <= t:
        raise ValueError(f"need 0 < delta <= t, got delta={delta}, t={t}")
    return sde_mean(x_t, velocity, t, delta, sigma**2 * delta), sigma * math.sqrt(delta)


def sde_mean(
    x_t: torch.Tensor, velocity: torch.Tensor, t: float, delta: float, variance: float | torch.Tensor
) -> torch.Tensor:
    """The marginal-preserving mean of ``x_{t - delta}`` for a transition of ``variance``
    (``sigma_t^2 delta``; a float or a tensor that broadcasts to ``x_t``, e.g. a learned one): the
    Euler step pulled towards the action by ``variance / (2 t)`` times the noise estimate."""
    action_hat = x_t - t * velocity
    noise_hat = x_t + (1.0 - t) * velocity
    return action_hat * (1.0 - t + delta) + noise_hat * (t - delta - variance / (2.0 * t))


def schedule_sigmas(times: torch.Tensor, noise_level: float) -> list[float]:
    """``sigma_t`` for the K steps of a schedule ``times`` [K + 1] (``times[0] = 1``, ``times[K] = 0``),
    the first step using ``times[1]`` in place of the pole at 1."""
    if len(times) < 3:
        raise ValueError(f"Flow-SDE needs at least 2 denoising steps, got {len(times) - 1}")
    return [sde_sigma(float(t), noise_level, float(times[1])) for t in times[:-1]]


def stochastic_step_mask(
    batch_size: int, num_steps: int, one_step: bool, generator: torch.Generator | None = None
) -> torch.Tensor:
    """bool [N, K]: which denoising steps of each sample are stochastic.

    All of them, or (two-layer MDP) one uniformly chosen step per sample.
    """
    if not one_step:
        return torch.ones(batch_size, num_steps, dtype=torch.bool)
    chosen = torch.randint(num_steps, (batch_size,), generator=generator)
    return torch.nn.functional.one_hot(chosen, num_steps).bool()
