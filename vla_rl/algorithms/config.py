"""Typed configuration of PPO (the ``algorithm`` group of the Hydra configs)."""

from __future__ import annotations

from dataclasses import dataclass

LR_SCHEDULES = ("adaptive", "fixed", "linear")
"""The values of ``PPOConfig.lr_schedule``."""


@dataclass
class PPOConfig:
    name: str = "ppo"
    """Algorithm: ``ppo`` (``vla_rl.algorithms.registry.ALGORITHMS``) or ``package.module:Class``."""
    num_steps: int = 32
    """Control steps collected per world per iteration (rollout length T)."""
    num_epochs: int = 5
    """Passes over each rollout."""
    num_minibatches: int = 4
    """Minibatches per epoch; the batch is ``num_steps * num_envs`` transitions."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_ratio: float = 0.2
    """Surrogate clipping epsilon."""
    value_clip: float = 0.2
    """Clip range of the value update around the rollout's values; ``<= 0`` disables."""
    value_coef: float = 1.0
    """Weight of the value loss."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus; 0 disables."""
    learning_rate: float = 1e-3
    """Initial Adam learning rate."""
    lr_schedule: str = "adaptive"
    """``adaptive`` (divide by 1.5 when KL > 2 * desired_kl, multiply by 1.5 when KL <
    desired_kl / 2, within [1e-5, 1e-2]), ``fixed``, or ``linear`` (from ``learning_rate`` down
    to 0 over ``lr_decay_iterations`` updates: iteration k trains at ``learning_rate * (1 - k / N)``)."""
    lr_decay_iterations: int = 0
    """Updates over which ``linear`` decays the learning rate to 0 (required > 0 for ``linear``)."""
    desired_kl: float = 0.01
    """Target KL for the adaptive schedule."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip; ``<= 0`` disables."""
    normalize_advantages: bool = True
    """Normalise advantages per minibatch to zero mean, unit std."""
