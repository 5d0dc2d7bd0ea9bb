import math

import pytest
import torch

from vla_rl.algorithms.surrogate import (
    ADVANTAGE_EPS,
    clipped_surrogate,
    clipped_value_loss,
    kl_to_reference,
    masked_mean,
    normalize_advantages,
)


def test_surrogate_matches_hand_computed_asymmetric_and_dual_clip():
    ratio = torch.tensor([0.5, 1.5, 1.5, 0.5, 5.0])
    advantages = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0])
    loss, clipped = clipped_surrogate(ratio.log(), advantages, clip_low=0.2, clip_high=0.28, dual_clip=3.0)
    # max(-A r, -A clip(r, 0.8, 1.28)), then min(., 3 |A|) where A < 0.
    torch.testing.assert_close(loss, torch.tensor([-0.5, -1.28, 1.5, 0.8, 3.0]))
    assert clipped.tolist() == [True, True, True, True, True]
    loss_no_dual, _ = clipped_surrogate(ratio.log(), advantages, 0.2, 0.28)
    assert loss_no_dual[-1].item() == pytest.approx(5.0)


def test_surrogate_at_ratio_one_is_minus_advantage_and_unclipped():
    advantages = torch.tensor([2.0, -0.5])
    loss, clipped = clipped_surrogate(torch.zeros(2), advantages, 0.2, 0.2)
    torch.testing.assert_close(loss, -advantages)
    assert not clipped.any()


def test_dual_clip_must_exceed_one():
    with pytest.raises(ValueError, match="dual_clip"):
        clipped_surrogate(torch.zeros(1), torch.ones(1), 0.2, 0.2, dual_clip=1.0)


def test_clipped_value_loss_takes_the_larger_error():
    value = torch.tensor([2.0, 0.5, 2.5])
    old_value = torch.tensor([1.0, 1.0, 1.0])
    returns = torch.tensor([0.0, 3.0, 2.0])
    loss = clipped_value_loss(value, old_value, returns, clip=0.2)
    # plain (v - R)^2 = 4, 6.25, 0.25; clipped values 1.2, 0.8, 1.2 -> 1.44, 4.84, 0.64.
    torch.testing.assert_close(loss, torch.tensor([4.0, 6.25, 0.64]))
    torch.testing.assert_close(
        clipped_value_loss(value, old_value, returns, clip=0.0), torch.tensor([4.0, 6.25, 0.25])
    )


def test_huber_value_loss_is_linear_outside_delta():
    loss = clipped_value_loss(
        torch.tensor([4.0]), torch.tensor([4.0]), torch.tensor([0.0]), 0.2, huber_delta=1.0
    )
    assert loss.item() == pytest.approx(3.5)  # delta (|e| - delta / 2)


def test_kl_to_reference_hand_value_and_zero_at_equality():
    kl = kl_to_reference(torch.tensor([0.0, -1.0]), torch.tensor([math.log(0.5), -1.0]))
    torch.testing.assert_close(kl, torch.tensor([0.5 + math.log(2.0) - 1.0, 0.0]))


def test_masked_mean_ignores_masked_entries_and_is_zero_when_empty():
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert masked_mean(values, torch.tensor([True, False, True, False])).item() == 2.0
    assert masked_mean(values, torch.zeros(4, dtype=torch.bool)).item() == 0.0
    assert masked_mean(values, None).item() == 2.5


def test_normalize_advantages_uses_the_kept_entries_statistics():
    # Kept 1, 2, 3: mean 2, sample std 1, so every entry (the dropped 6 too) maps to (A - 2) / (1 + eps).
    advantages = torch.tensor([1.0, 2.0, 3.0, 6.0], dtype=torch.float64)
    keep = torch.tensor([True, True, True, False])
    expected = torch.tensor([-1.0, 0.0, 1.0, 4.0], dtype=torch.float64) / (1.0 + ADVANTAGE_EPS)
    assert torch.equal(normalize_advantages(advantages, keep), expected)
    # All kept: 1, 2, 3, 6 have mean 3 and sample std sqrt(14 / 3).
    whole = normalize_advantages(advantages)
    assert torch.allclose(whole, (advantages - 3.0) / (14.0 / 3.0) ** 0.5, atol=1e-7)


def test_normalize_advantages_leaves_fewer_than_two_kept_entries_alone():
    advantages = torch.tensor([5.0, -2.0])
    assert normalize_advantages(advantages, torch.tensor([True, False])) is advantages
    assert torch.equal(normalize_advantages(advantages[:1]), advantages[:1])
