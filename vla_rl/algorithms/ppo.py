"""Proximal Policy Optimisation with clipped surrogate, clipped value loss and a KL-adaptive, fixed
or linearly decaying learning rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from vla_rl.algorithms.config import LR_SCHEDULES, PPOConfig
from vla_rl.algorithms.policy_gradient import PolicyGradient, StepLosses
from vla_rl.algorithms.surrogate import clipped_surrogate, clipped_value_loss
from vla_rl.algorithms.surrogate import normalize_advantages as normalized_advantages
from vla_rl.policies.base import ActorCriticPolicy
from vla_rl.rollout.buffer import Minibatch, RolloutBuffer

MIN_LEARNING_RATE = 1e-5
MAX_LEARNING_RATE = 1e-2
LR_ADAPT_FACTOR = 1.5


def gaussian_kl(
    old_mean: torch.Tensor, old_std: torch.Tensor, new_mean: torch.Tensor, new_std: torch.Tensor
) -> torch.Tensor:
    """KL(old || new) of diagonal Gaussians, summed over the action dimension -> [B].

    ``log(s_new / s_old) + (s_old^2 + (m_old - m_new)^2) / (2 s_new^2) - 1/2`` per dimension.
    """
    per_dim = (
        torch.log(new_std / old_std)
        + (old_std.square() + (old_mean - new_mean).square()) / (2.0 * new_std.square())
        - 0.5
    )
    return per_dim.sum(dim=-1)


def linear_learning_rate(initial: float, iteration: int, decay_iterations: int) -> float:
    """``initial * (1 - iteration / decay_iterations)``, and 0 from ``decay_iterations`` on."""
    return initial * max(0.0, 1.0 - iteration / decay_iterations)


def adapt_learning_rate(learning_rate: float, kl: float, desired_kl: float) -> float:
    """Divide by 1.5 when ``kl > 2 desired_kl``, multiply by 1.5 when ``kl < desired_kl / 2``."""
    if kl > 2.0 * desired_kl:
        learning_rate /= LR_ADAPT_FACTOR
    elif kl < desired_kl / 2.0:
        learning_rate *= LR_ADAPT_FACTOR
    return min(max(learning_rate, MIN_LEARNING_RATE), MAX_LEARNING_RATE)


@dataclass
class PPOLosses(StepLosses):
    """Loss terms of one minibatch (``total`` carries the graph; the rest are detached)."""

    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    ratio: torch.Tensor
    """[B] probability ratios new / old."""
    clip_fraction: torch.Tensor
    """Fraction of samples with ``|ratio - 1| > clip_ratio``."""
    approx_kl: torch.Tensor
    """Sample estimate ``mean((ratio - 1) - log ratio)`` of KL(old || new)."""
    kl: torch.Tensor
    """Analytic KL(old || new) of the Gaussians, averaged over the batch."""
    auxiliary_loss: torch.Tensor | None = None
    """The policy's own auxiliary loss (already weighted and part of ``total``), if it has one."""
    NOT_METRICS: ClassVar[tuple[str, ...]] = ("total", "ratio")


class PPO(PolicyGradient):
    """Epochs x minibatches of clipped-surrogate updates on one rollout (RSL-RL flavoured).

    Value loss is the plain squared error (no 1/2 factor), clipped around the rollout's values
    when ``value_clip > 0``: ``max((v - R)^2, (v_old + clip(v - v_old, -c, c) - R)^2)``.
    """

    COUNTERS = ("iterations_done",)

    def __init__(
        self, policy: ActorCriticPolicy, cfg: PPOConfig, generator: torch.Generator | None = None
    ) -> None:
        if cfg.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"unknown lr_schedule {cfg.lr_schedule!r}; allowed: {list(LR_SCHEDULES)}")
        if cfg.lr_schedule == "linear" and cfg.lr_decay_iterations <= 0:
            raise ValueError(
                f"lr_schedule 'linear' needs lr_decay_iterations > 0, got {cfg.lr_decay_iterations}"
            )
        self.learning_rate = float(cfg.learning_rate)
        super().__init__(policy, cfg, torch.optim.Adam(policy.parameters(), lr=self.learning_rate), generator)
        self.iterations_done = 0
        """Updates (rollouts trained on) so far; the linear schedule reads it."""

    def compute_losses(self, batch: Minibatch, normalize_advantages: bool | None = None) -> PPOLosses:
        """Losses of one minibatch; ``normalize_advantages`` overrides the config (data-parallel
        ranks normalise the whole minibatch before taking their share)."""
        cfg = self.cfg
        batch = _valid_only(batch)
        log_prob, entropy, value, mean, std = self.policy.evaluate_actions(batch["obs"], batch["actions"])
        advantages = batch["advantages"]
        normalize = cfg.normalize_advantages if normalize_advantages is None else normalize_advantages
        if normalize:
            advantages = normalized_advantages(advantages)

        log_ratio = log_prob - batch["log_probs"]
        ratio = log_ratio.exp()
        surrogate, clipped = clipped_surrogate(log_ratio, advantages, cfg.clip_ratio, cfg.clip_ratio)
        policy_loss = surrogate.mean()
        value_loss = clipped_value_loss(value, batch["values"], batch["returns"], cfg.value_clip).mean()

        entropy_mean = entropy.mean()
        total = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy_mean
        auxiliary_loss = self.policy.auxiliary_loss(batch["obs"])
        if auxiliary_loss is not None:
            total = total + auxiliary_loss
        with torch.no_grad():
            clip_fraction = clipped.float().mean()
            approx_kl = ((ratio - 1.0) - log_ratio).mean()
            kl = gaussian_kl(batch["means"], batch["stds"], mean, std).mean()
        return PPOLosses(
            total=total,
            policy_loss=policy_loss.detach(),
            value_loss=value_loss.detach(),
            entropy=entropy_mean.detach(),
            ratio=ratio.detach(),
            clip_fraction=clip_fraction,
            approx_kl=approx_kl,
            kl=kl,
            auxiliary_loss=None if auxiliary_loss is None else auxiliary_loss.detach(),
        )

    def _minibatch_losses(self, batch: Minibatch) -> PPOLosses:
        """The losses of one gradient step (a data-parallel rank computes them on its share)."""
        return self.compute_losses(batch)

    def _set_learning_rate(self, learning_rate: float) -> None:
        self.learning_rate = learning_rate
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    def update(self, buffer: RolloutBuffer) -> dict[str, float]:
        """Train on a full rollout; returns metrics averaged over all minibatch steps."""
        cfg = self.cfg
        if cfg.lr_schedule == "linear":
            self._set_learning_rate(
                linear_learning_rate(cfg.learning_rate, self.iterations_done, cfg.lr_decay_iterations)
            )
        buffer.compute_returns(buffer.last_value, cfg.gamma, cfg.gae_lambda)
        self.policy.train()
        metrics, _ = self.gradient_steps(
            lambda: buffer.minibatches(cfg.num_minibatches, self.generator),
            lambda batch: batch["valid"],
            self._minibatch_losses,
            self._adapt_learning_rate,
        )
        self.iterations_done += 1
        # The observation statistics take in the rollout only now: the update above started from
        # the policy that collected the batch (importance ratios of exactly 1 at its first step).
        self.policy.update_normalizer(buffer.obs)
        metrics["learning_rate"] = self.learning_rate
        metrics["explained_variance"] = explained_variance(buffer.values, buffer.returns)
        metrics["action_std"] = float(buffer.stds.mean())
        return metrics

    def _adapt_learning_rate(self, losses: PPOLosses) -> None:
        # The KL is measured before this step's gradient, on the policy the previous minibatches
        # produced, so the lr reacts to how far the rollout policy has moved.
        if self.cfg.lr_schedule == "adaptive":
            kl = self._metric(losses.kl)
            self._set_learning_rate(adapt_learning_rate(self.learning_rate, kl, self.cfg.desired_kl))

    def state_dict(self) -> dict[str, Any]:
        """The optimiser's and the minibatch generator's state, the updates made and the current
        learning rate (the policy weights are saved with the policy)."""
        return {**super().state_dict(), "learning_rate": self.learning_rate}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self._set_learning_rate(float(state["learning_rate"]))


def _valid_only(batch: Minibatch) -> Minibatch:
    """``batch`` without the transitions marked invalid (steps that never ran), if there are any."""
    valid = batch.get("valid")
    if valid is None or bool(valid.all()):
        return batch
    kept = {name: value[valid] for name, value in batch.items() if name not in ("obs", "valid")}
    kept["obs"] = {key: value[valid] for key, value in batch["obs"].items()}
    return kept


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(returns - values) / Var(returns)``; NaN when the returns are constant."""
    var_returns = returns.var()
    if var_returns == 0:
        return float("nan")
    return float(1.0 - (returns - values).var() / var_returns)
