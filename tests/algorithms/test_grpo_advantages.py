import math

import pytest
import torch

from vla_rl.algorithms.grpo_advantages import (
    advantage_scales,
    broadcast_to_steps,
    centred_advantages,
    group_advantages,
    informative_groups,
    pooled_decision_scales,
    returns_to_go,
    weight_negatives,
)


def test_group_advantages_hand_values_and_zero_mean_per_group():
    scores = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [3.0, 1.0, 2.0, 2.0]])
    advantages = group_advantages(scores)
    # group 0: mean 0.5, sample std sqrt(1/3); group 1: constant -> 0; group 2: mean 2, std sqrt(2/3).
    half = 0.5 / math.sqrt(1.0 / 3.0)
    torch.testing.assert_close(advantages[0], torch.tensor([half, -half, -half, half]), atol=1e-5, rtol=1e-5)
    assert advantages[1].abs().max().item() == 0.0
    torch.testing.assert_close(
        advantages[2, 0], torch.tensor(1.0 / math.sqrt(2.0 / 3.0)), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(advantages.mean(dim=1), torch.zeros(3), atol=1e-6, rtol=0)


def batch_scaled(scores: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return centred_advantages(scores, advantage_scales(scores, keep, "batch"))


def test_batch_scaled_advantages_hand_values_weigh_groups_by_their_spread():
    scores = torch.tensor([[1.0, 0.0, 0.0, 1.0], [3.0, 1.0, 2.0, 2.0], [9.0, 0.0, 0.0, 0.0]])
    keep = torch.tensor([True, True, False])
    advantages = batch_scaled(scores, keep)
    # Centred: [.5, -.5, -.5, .5] and [1, -1, 0, 0]; over the 8 kept entries the squares sum to 3,
    # so the std is sqrt(3 / 7). The dropped group does not enter it.
    std = math.sqrt(3.0 / 7.0)
    expected = torch.tensor([[0.5, -0.5, -0.5, 0.5], [1.0, -1.0, 0.0, 0.0]]) / std
    torch.testing.assert_close(advantages[:2], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(advantages.mean(dim=1), torch.zeros(3), atol=1e-6, rtol=0)
    # Group 1 spreads twice as far as group 0 and now weighs twice as much; standardised per
    # group, both would reach the same size.
    assert advantages[1, 0] / advantages[0, 0] == pytest.approx(2.0)
    per_group = group_advantages(scores[:2])
    assert per_group[1, 0] / per_group[0, 0] == pytest.approx(
        1.0 / math.sqrt(2.0 / 3.0) / (0.5 / math.sqrt(1.0 / 3.0))
    )
    # Nothing kept: the scale is 1 (nothing trains; the trainer masks every decision out).
    assert advantage_scales(scores, torch.zeros(3, dtype=torch.bool), "batch").item() == 1.0


def test_group_advantages_need_groups_of_two():
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.ones(3, 1))


def test_informative_groups_drop_all_fail_and_all_success():
    success = torch.tensor([[0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 1, 0]], dtype=torch.bool)
    assert informative_groups(success).tolist() == [False, False, True, True]
    assert informative_groups(success, low=0.3, high=0.7).tolist() == [False, False, False, False]


def test_broadcast_zeroes_steps_after_done():
    step_mask = torch.tensor([[True, True], [True, False], [False, False]])
    steps = broadcast_to_steps(torch.tensor([2.0, -1.0]), step_mask)
    torch.testing.assert_close(steps, torch.tensor([[2.0, -1.0], [2.0, 0.0], [0.0, 0.0]]))


def test_weight_negatives_scales_the_below_average_episodes_only():
    # One success of four: mean 0.25, sample std sqrt((0.75^2 + 3 * 0.25^2) / 3) = 0.5,
    # advantages 1.5 and -0.5 (x3).
    advantages = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))
    torch.testing.assert_close(advantages, torch.tensor([[1.5, -0.5, -0.5, -0.5]]), atol=1e-5, rtol=0)
    half = weight_negatives(advantages, 0.5)
    torch.testing.assert_close(half, torch.tensor([[1.5, -0.25, -0.25, -0.25]]), atol=1e-5, rtol=0)
    only_successes = weight_negatives(advantages, 0.0)
    torch.testing.assert_close(only_successes, torch.tensor([[1.5, 0.0, 0.0, 0.0]]), atol=1e-5, rtol=0)
    assert weight_negatives(advantages, 1.0).equal(advantages)
    with pytest.raises(ValueError, match="negative_weight"):
        weight_negatives(advantages, 1.5)


def test_returns_to_go_and_their_advantages_hand_values():
    # Two episodes of one group, three decisions: rewards [1, 0, 3] and [0, 2, 0].
    rewards = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    to_go = returns_to_go(rewards)
    torch.testing.assert_close(to_go, torch.tensor([[4.0, 2.0], [3.0, 2.0], [3.0, 0.0]]))
    # Whole returns 4 and 2: sample std sqrt(2). Centred per decision: +-1, +-0.5, +-1.5.
    scale = advantage_scales(to_go[0].view(1, 2), keep_group=None, how="group")
    advantages = centred_advantages(to_go.view(3, 1, 2), scale).view(3, 2)
    root2 = math.sqrt(2.0)
    expected = torch.tensor([[1.0, -1.0], [0.5, -0.5], [1.5, -1.5]]) / root2
    torch.testing.assert_close(advantages, expected, atol=1e-5, rtol=0)
    # The first decision's advantage is the episode-level one.
    torch.testing.assert_close(advantages[0], group_advantages(to_go[0].view(1, 2))[0], atol=1e-6, rtol=0)


def test_centred_returns_to_go_need_groups_of_two():
    with pytest.raises(ValueError, match="group_size"):
        centred_advantages(torch.ones(3, 2, 1), torch.ones(2, 1))


def test_discounted_returns_to_go_and_their_pooled_scale_hand_values():
    # The same two episodes as above, the reward one decision ahead weighted by 0.5.
    rewards = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    to_go = returns_to_go(rewards, discount=0.5)
    # Episode 0: 3 -> 0 + 0.5 * 3 = 1.5 -> 1 + 0.5 * 1.5 = 1.75; episode 1: 0 -> 2 -> 0 + 0.5 * 2 = 1.
    torch.testing.assert_close(to_go, torch.tensor([[1.75, 1.0], [1.5, 2.0], [3.0, 0.0]]))
    torch.testing.assert_close(returns_to_go(rewards, discount=1.0), returns_to_go(rewards))
    # Centred per decision: +-0.375, -+0.25, +-1.5. Pooled sample std over the six entries (mean 0):
    # sqrt(2 * (0.375^2 + 0.25^2 + 1.5^2) / 5) = sqrt(4.90625 / 5) = sqrt(0.98125).
    centred = (to_go - to_go.mean(dim=1, keepdim=True)).view(3, 1, 2)
    valid = torch.ones(3, 1, 2, dtype=torch.bool)
    scale = pooled_decision_scales(centred, valid, torch.tensor([True]), "group")
    torch.testing.assert_close(scale, torch.tensor([[math.sqrt(0.98125)]]))
    # Without the last decision of episode 1: five entries, (0.28125 + 0.125 + 2.25) / 4 = 0.6640625.
    valid[2, 0, 1] = False
    scale = pooled_decision_scales(centred, valid, torch.tensor([True]), "group")
    torch.testing.assert_close(scale, torch.tensor([[math.sqrt(0.6640625)]]))
    with pytest.raises(ValueError, match="discount"):
        returns_to_go(rewards, discount=0.0)


def test_pooled_scale_over_the_batch_counts_only_kept_groups():
    # Two groups of two, one decision: centred +-1 in group 0 and +-3 in group 1.
    centred = torch.tensor([[[1.0, -1.0], [3.0, -3.0]]])
    valid = torch.ones(1, 2, 2, dtype=torch.bool)
    both = pooled_decision_scales(centred, valid, torch.tensor([True, True]), "batch")
    torch.testing.assert_close(both, torch.tensor(math.sqrt(20.0 / 3.0)))
    first = pooled_decision_scales(centred, valid, torch.tensor([True, False]), "batch")
    torch.testing.assert_close(first, torch.tensor(math.sqrt(2.0)))
    per_group = pooled_decision_scales(centred, valid, torch.tensor([True, True]), "group")
    torch.testing.assert_close(per_group, torch.tensor([[math.sqrt(2.0)], [math.sqrt(18.0)]]))
    nothing = pooled_decision_scales(centred, torch.zeros_like(valid), torch.tensor([True, True]), "group")
    torch.testing.assert_close(nothing, torch.ones(2, 1))
