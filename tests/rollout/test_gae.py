import pytest
import torch

from vla_rl.rollout import compute_gae
from vla_rl.rollout.buffer import RolloutBuffer
from vla_rl.rollout.gae import chunk_rewards


def test_gae_matches_hand_computed_values_with_a_done_in_the_middle():
    # gamma 0.9, lambda 0.8. Env 0: done at t=1, so t=0 bootstraps from V(1) but t=1 does not.
    #   t=2: delta = 3 + 0.9*2.0 - 1.5 = 3.3                      A = 3.3
    #   t=1: delta = 2 - 1.0 = 1.0 (done)                         A = 1.0
    #   t=0: delta = 1 + 0.9*1.0 - 0.5 = 1.4;  A = 1.4 + 0.72*1.0 = 2.12
    # Env 1: done at t=2 (last_value ignored), zero values.
    #   A2 = 1, A1 = 0.72 * 1 = 0.72, A0 = 0.72 * 0.72 = 0.5184
    rewards = torch.tensor([[1.0, 0.0], [2.0, 0.0], [3.0, 1.0]])
    values = torch.tensor([[0.5, 0.0], [1.0, 0.0], [1.5, 0.0]])
    dones = torch.tensor([[False, False], [True, False], [False, True]])
    last_value = torch.tensor([2.0, 5.0])
    advantages, returns = compute_gae(rewards, values, dones, last_value, gamma=0.9, lam=0.8)
    expected_adv = torch.tensor([[2.12, 0.5184], [1.0, 0.72], [3.3, 1.0]])
    torch.testing.assert_close(advantages, expected_adv)
    torch.testing.assert_close(returns, expected_adv + values)
    torch.testing.assert_close(returns[:, 0], torch.tensor([2.62, 2.0, 4.8]))


def test_gae_with_lambda_one_is_the_discounted_return_minus_value():
    rewards = torch.tensor([[1.0], [1.0], [1.0]])
    values = torch.tensor([[0.3], [0.2], [0.1]])
    dones = torch.zeros(3, 1, dtype=torch.bool)
    advantages, returns = compute_gae(rewards, values, dones, torch.tensor([10.0]), gamma=0.5, lam=1.0)
    # R2 = 1 + 0.5*10 = 6, R1 = 1 + 0.5*6 = 4, R0 = 1 + 0.5*4 = 3
    torch.testing.assert_close(returns, torch.tensor([[3.0], [4.0], [6.0]]))
    torch.testing.assert_close(advantages, returns - values)


def test_chunk_rewards_sum_executed_steps_with_discount():
    step_rewards = torch.tensor([[[1.0, 0.0, 2.0]]])
    executed = torch.tensor([[[True, True, False]]])
    reward, discount = chunk_rewards(step_rewards, executed, gamma=0.5)
    assert reward.item() == pytest.approx(1.0)  # 1 + 0.5 * 0; the third step did not run
    assert discount.item() == pytest.approx(0.25)  # 0.5 ** 2 executed steps


def test_chunk_level_gae_matches_hand_computation():
    rewards = torch.tensor([[1.0], [2.0]])
    discounts = torch.tensor([[0.25], [0.5]])
    values = torch.tensor([[0.5], [1.0]])
    dones = torch.zeros(2, 1, dtype=torch.bool)
    advantages, returns = compute_gae(rewards, values, dones, torch.tensor([2.0]), discounts, lam=0.5)
    # delta_1 = 2 + 0.5 * 2 - 1 = 2 = A_1; delta_0 = 1 + 0.25 * 1 - 0.5 = 0.75,
    # A_0 = 0.75 + 0.25 * 0.5 * 2 = 1.0.
    torch.testing.assert_close(advantages, torch.tensor([[1.0], [2.0]]))
    torch.testing.assert_close(returns, torch.tensor([[1.5], [3.0]]))


def test_per_step_gae_of_a_chunk_rollout_matches_hand_computation():
    # One world, two decisions of 2 steps; gamma 0.5, lambda 1 (Monte Carlo with bootstrap).
    # Steps: r = 1, 2 | 3, (not executed: the episode ended at the first step of decision 1).
    # V(decision 0) = 1 for both its steps, V(decision 1) = 2, last value 10 (cut by the end).
    # A(s2) = 3 - 2 = 1; A(s1) = 2 + 0.5 * 2 - 1 + 0.5 * 1 = 2.5; A(s0) = 1 + 0.5 * 1 - 1 + 0.5 * 2.5 = 1.75.
    batch = RolloutBuffer(num_steps=2, num_envs=1)
    for rewards, executed, value, done in (
        ([1.0, 2.0], [True, True], 1.0, False),
        ([3.0, 0.0], [True, False], 2.0, True),
    ):
        batch.add_decision(
            {"proprio": torch.zeros(1, 1)},
            {},
            torch.zeros(1),
            torch.tensor([value]),
            torch.zeros(1),
            torch.ones(1),
            torch.tensor([done]),
            torch.ones(1, dtype=torch.bool),
            torch.tensor([rewards]),
            torch.tensor([executed]),
        )
    batch.last_value = torch.tensor([10.0])
    advantages, returns = batch.step_gae(gamma=0.5, lam=1.0)
    torch.testing.assert_close(advantages[0, 0], torch.tensor([1.75, 2.5]))
    assert advantages[1, 0, 0].item() == pytest.approx(1.0)
    # Value targets: the discounted returns 1 + 0.5 * 2 + 0.25 * 3 = 2.75 and 3.
    torch.testing.assert_close(returns, torch.tensor([[2.75], [3.0]]))


def test_gae_keeps_every_tensor_on_the_rollout_device():
    """A float ``gamma`` becomes a tensor on the rewards' device (PPO on CUDA once failed here).
    The ``meta`` device stands in for a GPU: mixing it with CPU tensors raises as CUDA does."""
    rewards = torch.zeros(3, 2, device="meta")
    zeros = torch.zeros_like(rewards)
    advantages, returns = compute_gae(rewards, zeros, zeros, torch.zeros(2, device="meta"), 0.9, 0.95)
    assert advantages.device.type == "meta" and returns.device.type == "meta"


def test_chunk_rewards_keep_every_tensor_on_the_step_rewards_device():
    """The discount powers [H] are made on the step rewards' device (``meta`` stands in for a GPU)."""
    step_rewards = torch.zeros(3, 2, 4, device="meta")
    reward, discount = chunk_rewards(step_rewards, torch.ones_like(step_rewards, dtype=torch.bool), 0.9)
    assert reward.device.type == "meta" and discount.device.type == "meta"
