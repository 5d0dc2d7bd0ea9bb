"""Typed configuration of PPO (the ``algorithm`` group of the Hydra configs) and the settings it
shares with RL of chunk policies (``chunk_config.ChunkRLConfig``)."""

from __future__ import annotations

from dataclasses import dataclass

from vla_rl.config.structured import Check, in_unit_interval, positive

LR_SCHEDULES = ("adaptive", "fixed", "linear")
"""The values of ``PPOConfig.lr_schedule``."""


@dataclass
class ActorCriticConfig:
    """The settings of an actor-critic update that PPO of a state policy (``PPOConfig``) and RL of a
    chunk policy (``ChunkRLConfig``) share."""

    num_epochs: int = 5
    """Passes over each rollout."""
    num_minibatches: int = 4
    """Minibatches per epoch (state PPO: of a batch of ``num_steps * num_envs`` transitions)."""
    gamma: float = 0.99
    """Discount factor per control step (a chunk of k executed steps discounts by ``gamma ** k``)."""
    gae_lambda: float = 0.95
    """GAE lambda (chunk PPO: per decision, or per control step with ``advantage_granularity: step``)."""
    value_clip: float = 0.2
    """Clip range of the value update around the rollout's values; ``<= 0`` disables."""
    value_coef: float = 1.0
    """Weight of the value loss."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus; 0 disables."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip; ``<= 0`` disables."""
    normalize_advantages: bool = True
    """Standardise advantages to zero mean and unit std (state PPO: per minibatch; chunk PPO: over
    the valid entries of the rollout)."""


ACTOR_CRITIC_CHECKS: list[Check[ActorCriticConfig]] = [
    *positive("num_epochs", "num_minibatches"),
    in_unit_interval("gamma", open_low=True),
    in_unit_interval("gae_lambda"),
]
"""The checks of the shared settings (keys below ``algorithm``)."""


@dataclass
class PPOConfig(ActorCriticConfig):
    name: str = "ppo"
    """Algorithm: ``ppo`` (``vla_rl.algorithms.registry.ALGORITHMS``) or ``package.module:Class``."""
    num_steps: int = 32
    """Control steps collected per world per iteration (rollout length T)."""
    clip_ratio: float = 0.2
    """Surrogate clipping epsilon."""
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
    normalize_rewards: bool | None = None
    """Divide the rewards the critic and the advantages see by a running std of the discounted
    return (``vla_rl.rollout.reward_scaling``). None (the default) is resolved when the config is
    validated: on for ``env.backend=gymnasium`` (rewards of any scale) unless a reward model scores
    the rollouts, off for the built-in tasks (their rewards are designed at unit scale)."""
