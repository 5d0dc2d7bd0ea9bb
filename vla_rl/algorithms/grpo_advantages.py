"""Group-relative advantages (GRPO) and the dynamic-sampling filter.

A group is G episodes that started from the same initial state. Each episode gets one score
(success, or its summed reward until the first done); its advantage is the score standardised
within the group, ``(R - mean) / (std + eps)``, and every executed step of the episode carries it.
Groups whose success rate is all-fail or all-success carry no signal (every advantage is 0) and
dynamic sampling drops them before the batch is filled. ``negative_weight`` < 1 scales the
below-average episodes' (negative) advantages down: the update then mostly reinforces what
succeeded (positive-sample reinforcement, as rejection-sampling fine-tuning does at weight 0).
"""

from __future__ import annotations

import torch

ADVANTAGE_EPS = 1e-6


def group_advantages(scores: torch.Tensor, eps: float = ADVANTAGE_EPS) -> torch.Tensor:
    """[num_groups, group_size] scores -> advantages of the same shape.

    The standard deviation is the sample one (Bessel-corrected), as in the published recipes.
    """
    if scores.dim() != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must be [num_groups, group_size >= 2], got {tuple(scores.shape)}")
    mean = scores.mean(dim=1, keepdim=True)
    std = scores.std(dim=1, keepdim=True)
    return (scores - mean) / (std + eps)


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
