"""Loss terms and the advantage normaliser shared by every policy-gradient algorithm: state PPO,
chunk PPO and GRPO (VLAs and flow policies), and the data-parallel PPO ranks.

The loss functions work per sample (any shape) and leave the reduction to the caller, who knows
the mask: token-level log-probabilities of a token VLA reduce with ``masked_mean`` over valid
tokens, chunk-level ones over valid chunks, state PPO's over the valid transitions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

ADVANTAGE_EPS = 1e-8
"""Added to the standard deviation that divides normalised advantages, so a batch whose advantages
are (nearly) all equal is not blown up."""


def normalize_advantages(advantages: torch.Tensor, keep: torch.Tensor | None = None) -> torch.Tensor:
    """``(A - mean) / (std + ADVANTAGE_EPS)``, the mean and (Bessel-corrected) std taken over the
    entries ``keep`` marks (all when None); unchanged when fewer than two are kept."""
    kept = advantages if keep is None else advantages[keep]
    if kept.numel() < 2:
        return advantages
    return (advantages - kept.mean()) / (kept.std() + ADVANTAGE_EPS)


def clipped_surrogate(
    log_ratio: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's pessimistic surrogate, per sample, with asymmetric and optional dual clipping.

    ``loss = max(-A r, -A clip(r, 1 - clip_low, 1 + clip_high))``; with ``dual_clip = c > 1`` the loss
    of a sample with ``A < 0`` is also capped at ``-c A`` (a very large ratio on a bad sample cannot
    dominate the batch). Returns ``(loss, clipped)`` where ``clipped`` (bool) marks the samples
    whose ratio lies outside ``[1 - clip_low, 1 + clip_high]``.
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip}")
    ratio = log_ratio.exp()
    unclipped_loss = -advantages * ratio
    clipped_loss = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped_loss, clipped_loss)
    if dual_clip is not None:
        loss = torch.where(advantages < 0, torch.minimum(loss, -dual_clip * advantages), loss)
    clipped = (ratio < 1.0 - clip_low) | (ratio > 1.0 + clip_high)
    return loss, clipped


def clipped_value_loss(
    value: torch.Tensor,
    old_value: torch.Tensor,
    returns: torch.Tensor,
    clip: float,
    huber_delta: float | None = None,
) -> torch.Tensor:
    """Per-sample critic loss, the larger of the plain and the clipped error (clip <= 0: plain).

    The error is squared, or the Huber loss with ``huber_delta`` (quadratic inside, linear outside).
    """

    def error(prediction: torch.Tensor) -> torch.Tensor:
        if huber_delta is None:
            return (prediction - returns).square()
        return F.huber_loss(prediction, returns, reduction="none", delta=huber_delta)

    loss = error(value)
    if clip > 0:
        clipped_value = old_value + (value - old_value).clamp(-clip, clip)
        loss = torch.maximum(loss, error(clipped_value))
    return loss


def kl_to_reference(log_prob: torch.Tensor, reference_log_prob: torch.Tensor) -> torch.Tensor:
    """Per-sample estimate of KL(policy || reference) from samples of the policy (Schulman's k3):
    ``exp(ref - logp) - (ref - logp) - 1``, non-negative and unbiased."""
    log_ratio = reference_log_prob - log_prob
    return log_ratio.exp() - log_ratio - 1.0


def masked_mean(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over the entries where ``mask`` is True (all of them when None); 0 when none is."""
    if mask is None:
        return values.mean()
    mask = mask.to(values.dtype).expand_as(values)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)
