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

``score: return_to_go`` gives each decision its own advantage instead of its episode's: the reward
summed from that decision to the episode's end (``returns_to_go``), centred on the group's mean of
the same sum at the same decision and divided by the scale of the whole-episode scores
(``centred_advantages``; GRPO with process supervision, DeepSeekMath sec. 4.1.3, with the group's
time-aligned episodes as the baseline). A decision's action cannot change the rewards paid before
it, so leaving them out removes variance without bias; the first decision's advantage is the
episode-level one.

``score_discount`` d < 1 discounts each reward-to-go by d per decision, so a decision is credited
mostly with the rewards of the next ~1 / (1 - d) decisions (token PPO's GAE weighs its credit by
gamma^k lambda per decision the same way). The whole-episode score then no longer measures those
sums, so each group's centred rewards-to-go are divided by their own std over the group's valid
decisions (``pooled_decision_scales``).
"""

from __future__ import annotations

import torch

GROUP_STD_EPS = 1e-6
"""Added to the group (or batch) std that divides GRPO's centred scores. Not the batch normaliser's
``surrogate.ADVANTAGE_EPS`` (1e-8): this guards GRPO's own advantage estimator, with the value the
committed GRPO recipes were run with (results stay identical)."""
ADVANTAGE_SCALES = ("group", "batch")


def group_advantages(scores: torch.Tensor, eps: float = GROUP_STD_EPS) -> torch.Tensor:
    """[num_groups, group_size] scores -> advantages of the same shape, ``(R - mean) / (std + eps)``
    per group, as published, with the sample (Bessel-corrected) std."""
    return centred_advantages(scores, advantage_scales(scores, keep_group=None, how="group"), eps)


def advantage_scales(scores: torch.Tensor, keep_group: torch.Tensor | None, how: str) -> torch.Tensor:
    """What divides the group-centred scores [num_groups, group_size]: each group's sample std
    ([num_groups, 1], ``group``) or one sample std over the centred scores of the groups where
    ``keep_group`` [num_groups] is True (a scalar, ``batch``; 1 when none is kept, as nothing then
    trains)."""
    _check_groups(scores)
    if how == "group":
        return scores.std(dim=1, keepdim=True)
    if how != "batch" or keep_group is None:
        raise ValueError(f"advantage scale must be 'group', or 'batch' with keep_group; got {how!r}")
    if not bool(keep_group.any()):
        return torch.ones(())
    centred = scores - scores.mean(dim=1, keepdim=True)
    return centred[keep_group].std()


def centred_advantages(scores: torch.Tensor, scale: torch.Tensor, eps: float = GROUP_STD_EPS) -> torch.Tensor:
    """[..., num_groups, group_size] scores centred on their group's mean (the last dimension),
    divided by ``scale + eps``. With returns-to-go [T, num_groups, group_size], each decision is
    centred on its group at the same decision (episodes that already ended count with 0)."""
    if scores.dim() < 2 or scores.shape[-1] < 2:
        raise ValueError(f"scores must be [..., num_groups, group_size >= 2], got {tuple(scores.shape)}")
    return (scores - scores.mean(dim=-1, keepdim=True)) / (scale + eps)


def returns_to_go(decision_rewards: torch.Tensor, discount: float = 1.0) -> torch.Tensor:
    """[T, N] reward each decision's chunk earned -> [T, N] summed from that decision to the end,
    the reward k decisions later weighted by ``discount ** k`` (1: undiscounted, as the episode
    score ``return`` is)."""
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must lie in (0, 1], got {discount}")
    to_go = torch.zeros_like(decision_rewards)
    running = torch.zeros_like(decision_rewards[0])
    for t in range(len(decision_rewards) - 1, -1, -1):
        running = decision_rewards[t] + discount * running
        to_go[t] = running
    return to_go


def pooled_decision_scales(
    centred: torch.Tensor, valid: torch.Tensor, keep_group: torch.Tensor, how: str
) -> torch.Tensor:
    """The sample std of centred rewards-to-go [T, num_groups, group_size] over the ``valid`` [T,
    num_groups, group_size] entries: per group ([num_groups, 1], ``group``) or one over the groups
    where ``keep_group`` [num_groups] is True (a scalar, ``batch``); 1 where nothing is valid."""
    if how not in ADVANTAGE_SCALES:
        raise ValueError(f"advantage scale must be one of {ADVANTAGE_SCALES}, got {how!r}")
    weights = valid.to(centred.dtype)
    if how == "batch":
        weights = weights * keep_group.to(centred.dtype).view(1, -1, 1)
        dims: tuple[int, ...] = (0, 1, 2)
    else:
        dims = (0, 2)
    count = weights.sum(dim=dims)
    variance = (centred.square() * weights).sum(dim=dims) / (count - 1).clamp(min=1)
    scale = torch.where(count > 1, variance.sqrt(), torch.ones_like(variance))
    return scale if how == "batch" else scale.unsqueeze(1)


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
