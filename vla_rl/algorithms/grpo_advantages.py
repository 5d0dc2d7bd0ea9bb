"""Group-relative advantages (GRPO) and the dynamic-sampling filter.

A group is G episodes that started from the same initial state. Each episode gets one score
(success, or its summed reward until the first done); its advantage is the score standardised
within the group, ``(R - mean) / (std + eps)``, and every executed step of the episode carries it.
Groups whose success rate is all-fail or all-success carry no signal (every advantage is 0) and
dynamic sampling drops them before the batch is filled. ``negative_weight`` < 1 scales the
below-average episodes' (negative) advantages down: the update then mostly reinforces what
succeeded (positive-sample reinforcement, as rejection-sampling fine-tuning does at weight 0).

``ADVANTAGE_SCALES`` names what divides the centred scores: ``group`` (each group's own std, the
published GRPO) gives every kept group the same weight, however little its scores differ; ``batch``
(one std over all kept groups' centred scores) weighs a group by how far apart its episodes scored,
so a group whose scores differ only by shaping noise moves the policy less than one that holds
successes and failures.
"""

from __future__ import annotations

import torch

ADVANTAGE_EPS = 1e-6
ADVANTAGE_SCALES = ("group", "batch")


def group_advantages(scores: torch.Tensor, eps: float = ADVANTAGE_EPS) -> torch.Tensor:
    """[num_groups, group_size] scores -> advantages of the same shape.

    The standard deviation is the sample one (Bessel-corrected), as in the published recipes.
    """
    _check_groups(scores)
    mean = scores.mean(dim=1, keepdim=True)
    std = scores.std(dim=1, keepdim=True)
    return (scores - mean) / (std + eps)


def batch_scaled_advantages(
    scores: torch.Tensor, keep_group: torch.Tensor, eps: float = ADVANTAGE_EPS
) -> torch.Tensor:
    """[num_groups, group_size] scores -> each centred on its group's mean and divided by one sample
    std taken over the centred scores of the groups where ``keep_group`` [num_groups] is True."""
    _check_groups(scores)
    centred = scores - scores.mean(dim=1, keepdim=True)
    if not bool(keep_group.any()):
        return torch.zeros_like(centred)
    return centred / (centred[keep_group].std() + eps)


def _check_groups(scores: torch.Tensor) -> None:
    if scores.dim() != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must be [num_groups, group_size >= 2], got {tuple(scores.shape)}")


def weight_negatives(advantages: torch.Tensor, negative_weight: float) -> torch.Tensor:
    """Multiply the negative advantages by ``negative_weight`` (1 leaves them as they are)."""
    if not 0.0 <= negative_weight <= 1.0:
        raise ValueError(f"negative_weight must lie in [0, 1], got {negative_weight}")
    return torch.where(advantages < 0, negative_weight * advantages, advantages)


def informative_groups(success: torch.Tensor, low: float = 0.1, high: float = 0.9) -> torch.Tensor:
    """bool [num_groups]: groups whose mean success lies within ``[low, high]``."""
    rate = success.to(torch.float32).mean(dim=1)
    return (rate >= low) & (rate <= high)


def broadcast_to_steps(episode_advantages: torch.Tensor, step_mask: torch.Tensor) -> torch.Tensor:
    """[E] per-episode advantages -> [T, E] per step, zero where ``step_mask`` [T, E] is False
    (steps after the episode's first done)."""
    return episode_advantages.unsqueeze(0) * step_mask.to(episode_advantages.dtype)
