import math

import pytest
import torch

from vla_rl.algorithms.surrogate import clipped_surrogate, clipped_value_loss, kl_to_reference, masked_mean


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
