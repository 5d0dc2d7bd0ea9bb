"""The clipped policy-gradient update shared by PPO and GRPO on chunk policies.

Given rows of a rollout with an advantage each (``FlatBatch``), an update recomputes the behaviour
log-probabilities with the training model (the rollout may have run in another numeric mode, and a
stale copy would make the ratio differ from 1 before any step), optionally the reference policy's,
then runs epochs x minibatches of ``clipped_surrogate`` steps. Token- and action-level ratios count
only the actions a world executed (the first ``execute_steps`` of each chunk).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from torch import nn

from vla_rl.algorithms.chunk_config import ChunkRLConfig
from vla_rl.algorithms.policy_gradient import PolicyGradient, StepLosses
from vla_rl.algorithms.surrogate import clipped_surrogate, clipped_value_loss, kl_to_reference, masked_mean
from vla_rl.envs.batching import module_device, obs_to_device
from vla_rl.policies.chunk_policy import ChunkEvaluation, ChunkPolicy, check_log_prob_level
from vla_rl.rollout.flat_batch import FlatBatch, concat_zero_padded

VALUE_HEAD_PREFIX = "value_head."
NOISE_HEAD_PREFIX = "noise_head."


@dataclass
class ChunkLosses(StepLosses):
    """Loss terms of one minibatch (``total`` carries the graph; the rest are detached floats)."""

    policy_loss: float
    value_loss: float | None
    entropy: float
    kl_to_reference: float | None
    clip_fraction: float
    approx_kl: float
    ratio_mean: float


def executed_entry_mask(
    shape: torch.Size,
    level: str,
    execute_steps: int,
    valid: torch.Tensor,
    executed: torch.Tensor | None = None,
) -> torch.Tensor:
    """bool mask of ``shape`` ([B], [B, chunk] or [B, chunk, D]): valid rows and, below the chunk
    level, the actions each world executed (``executed`` [B, H]; without it the first
    ``execute_steps``)."""
    if level == "chunk":
        return valid
    chunk = shape[1]
    ran = torch.zeros(len(valid), chunk, dtype=torch.bool, device=valid.device)
    if executed is None:
        ran[:, : min(execute_steps, chunk)] = True
    else:
        ran[:, : executed.shape[1]] = executed.to(valid.device)
    mask = valid[:, None] & ran
    return mask[..., None].expand(shape) if len(shape) == 3 else mask


def broadcast_advantages(advantages: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Advantages per row [B] or per executed step [B, H] -> the shape of the log-probabilities
    ``like`` ([B], [B, chunk] or [B, chunk, D]); steps past H get 0 (they are masked out)."""
    if advantages.dim() == 1:
        return advantages.view(-1, *(1,) * (like.dim() - 1)).expand_as(like)
    if like.dim() == 1:
        raise ValueError("per-step advantages need token- or action-level log-probabilities")
    per_action = torch.zeros(like.shape[:2], dtype=advantages.dtype, device=advantages.device)
    per_action[:, : advantages.shape[1]] = advantages
    return per_action[..., None].expand_as(like) if like.dim() == 3 else per_action


class ChunkPolicyUpdate(PolicyGradient):
    """Optimiser groups, recomputation and losses; subclasses decide advantages and the critic."""

    COUNTERS = ("actor_steps", "updates")
    uses_critic = False
    episodic = False
    """Trains on one episode per world from shared group seeds (GRPO) instead of continuous rollouts."""

    def __init__(
        self,
        policy: ChunkPolicy,
        cfg: ChunkRLConfig,
        reference_policy: ChunkPolicy | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        cfg.validate()
        check_log_prob_level(policy, cfg.log_prob_level)
        if cfg.kl_coef > 0 and reference_policy is None:
            raise ValueError("kl_coef > 0 needs a reference policy")
        policy.critic_trains_features = cfg.critic_trains_features
        self.reference_policy = reference_policy
        self.full_rates = {"actor": cfg.actor_lr, "noise_head": cfg.noise_head_lr, "value": cfg.value_lr}
        """Each Adam group's rate from the config, by group name (the schedule scales all but ``value``)."""
        super().__init__(
            policy, cfg, torch.optim.Adam(self._param_groups(policy, self.full_rates)), generator
        )
        self.actor_steps = 0
        """Gradient steps that moved the actor so far (they drive ``actor_lr_warmup_steps`` and
        ``actor_lr_decay_steps``; saved in the checkpoint)."""
        self.updates = 0
        """Updates made so far (``critic_warmup_iterations`` counts them; saved in the checkpoint)."""

    @staticmethod
    def _param_groups(policy: ChunkPolicy, rates: dict[str, float | None]) -> list[dict]:
        """Adam groups by name: ``actor``, ``noise_head`` when it has its own rate, ``value``."""
        named: dict[str, list[nn.Parameter]] = {"actor": [], "noise_head": [], "value": []}
        for name, parameter in policy.named_parameters():
            if not parameter.requires_grad:
                continue
            if name.startswith(VALUE_HEAD_PREFIX):
                named["value"].append(parameter)
            elif name.startswith(NOISE_HEAD_PREFIX) and rates["noise_head"] is not None:
                named["noise_head"].append(parameter)
            else:
                named["actor"].append(parameter)
        return [
            {"params": params, "lr": rates[name], "name": name}
            for name, params in named.items()
            if params or name == "actor"
        ]

    # ----- before the update ------------------------------------------------------------------------------

    @torch.no_grad()
    def recompute(self, flat: FlatBatch) -> float:
        """Fill ``old_log_prob`` (training model), ``ref_log_prob`` (reference) and the policy's
        ``observation_cache`` (into ``flat.sample_info``, reused by every epoch); returns seconds."""
        start = time.perf_counter()
        parts: dict[str, list[torch.Tensor]] = {"old_log_prob": [], "ref_log_prob": []}
        caches: list[dict[str, torch.Tensor]] = []
        for part in flat.minibatches(self.cfg.num_minibatches, generator=None):  # in order
            if self.reference_policy is not None and self.cfg.kl_coef > 0:
                # before the cache joins: the reference encodes the observations with its own weights
                parts["ref_log_prob"].append(self._evaluate(self.reference_policy, part).log_prob.cpu())
            cache = self.policy.observation_cache(part.obs)
            part.sample_info.update(cache)
            caches.append({key: value.cpu() for key, value in cache.items()})
            if self.cfg.recompute_log_probs:
                parts["old_log_prob"].append(self._evaluate(self.policy, part).log_prob.cpu())
        for name, chunks in parts.items():
            if chunks:
                flat.tensors[name] = torch.cat(chunks)
        for key in caches[0] if caches else ():
            flat.sample_info[key] = concat_zero_padded([cache[key] for cache in caches])
        return time.perf_counter() - start

    def _evaluate(self, policy: ChunkPolicy, batch: FlatBatch, with_value: bool = False) -> ChunkEvaluation:
        device = module_device(policy)
        return policy.evaluate(
            obs_to_device(batch.obs, device),
            {k: v.to(device) for k, v in batch.sample_info.items()},
            temperature=self.cfg.temperature,
            log_prob_level=self.cfg.log_prob_level,
            with_value=with_value,
        )

    # ----- the update -------------------------------------------------------------------------------------

    def local_rows(self, batch: FlatBatch) -> FlatBatch:
        """The rows of a minibatch this process computes the losses of (a data-parallel rank: its
        share; here: all of them)."""
        return batch

    def mean(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """A loss term's mean over the minibatch's entries ``mask`` marks (a data-parallel rank's part
        of the mean over every rank's rows; here: ``masked_mean``)."""
        return masked_mean(values, mask)

    def losses(self, batch: FlatBatch, actor_active: bool = True) -> ChunkLosses:
        cfg = self.cfg
        batch = self.local_rows(batch)
        device = module_device(self.policy)
        evaluation = self._evaluate(self.policy, batch, self.uses_critic)
        tensors = {k: v.to(device) for k, v in batch.tensors.items()}
        log_prob = evaluation.log_prob
        mask = executed_entry_mask(
            log_prob.shape, cfg.log_prob_level, cfg.execute_steps, tensors["valid"], tensors.get("executed")
        )
        advantages = broadcast_advantages(tensors["advantages"], log_prob)
        log_ratio = log_prob - tensors["old_log_prob"]
        surrogate, clipped = clipped_surrogate(
            log_ratio, advantages, cfg.clip_low, cfg.clip_high, cfg.dual_clip
        )
        policy_loss = self.mean(surrogate, mask)
        total = policy_loss if actor_active else torch.zeros((), device=device)
        entropy = self.mean(evaluation.entropy, mask) if evaluation.entropy is not None else torch.zeros(())
        if cfg.entropy_coef > 0 and actor_active:
            total = total - cfg.entropy_coef * entropy
        kl = None
        if cfg.kl_coef > 0:
            kl = self.mean(kl_to_reference(log_prob, tensors["ref_log_prob"]), mask)
            if actor_active:
                total = total + cfg.kl_coef * kl
        value_loss = None
        if self.uses_critic:
            assert evaluation.value is not None
            per_row = clipped_value_loss(
                evaluation.value, tensors["old_value"], tensors["returns"], cfg.value_clip, cfg.huber_delta
            )
            value_loss = self.mean(per_row, tensors["valid"])
            total = total + cfg.value_coef * value_loss
        with torch.no_grad():
            ratio = log_ratio.exp()
            approx_kl = self.mean((ratio - 1.0) - log_ratio, mask)
        return ChunkLosses(
            total=total,
            policy_loss=float(policy_loss.detach()),
            value_loss=None if value_loss is None else float(value_loss.detach()),
            entropy=float(entropy.detach()),
            kl_to_reference=None if kl is None else float(kl.detach()),
            clip_fraction=float(self.mean(clipped.float(), mask)),
            approx_kl=float(approx_kl),
            ratio_mean=float(self.mean(ratio, mask)),
        )

    def optimise(self, flat: FlatBatch, actor_active: bool = True) -> dict[str, float]:
        """Epochs x minibatches of gradient steps; returns metrics averaged over the steps."""
        start = time.perf_counter()
        # Dropout stays off: the loss must see the network that sampled the rollout and recomputed
        # its log-probabilities, or the ratio starts away from 1.
        self.policy.eval()
        # Every group but the value head's follows the actor's schedule.
        scheduled = [group for group in self.optimizer.param_groups if group["name"] != "value"]

        def before_step(_: StepLosses) -> None:
            if not actor_active:
                # Critic warm-up: the value loss reaches the shared features too; only the value
                # head may move.
                for group in scheduled:
                    for parameter in group["params"]:
                        parameter.grad = None
                return
            self.actor_steps += 1
            scale = self.actor_lr(self.actor_steps) / self.cfg.actor_lr
            for group in scheduled:
                group["lr"] = self.full_rates[group["name"]] * scale

        metrics, steps = self.gradient_steps(
            lambda: flat.minibatches(self.cfg.num_minibatches, self.generator),
            lambda minibatch: minibatch.tensors["valid"],
            lambda minibatch: self.losses(minibatch, actor_active),
            before_step,
        )
        metrics["update_time_s"] = time.perf_counter() - start
        metrics["gradient_steps"] = float(steps)
        return metrics

    def actor_lr(self, step: int) -> float:
        """The actor's learning rate at its ``step``-th gradient step (counting from 1): linear
        warm-up, then constant or a linear decay to 0 at ``actor_lr_decay_steps``."""
        warmup, decay_end = self.cfg.actor_lr_warmup_steps, self.cfg.actor_lr_decay_steps
        if warmup > 0 and step < warmup:
            return self.cfg.actor_lr * step / warmup
        if decay_end > 0:
            return self.cfg.actor_lr * max(0.0, (decay_end - step) / (decay_end - warmup))
        return self.cfg.actor_lr
