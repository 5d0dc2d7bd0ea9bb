import math

import pytest
import torch

from vla_rl.rollout.reward_scaling import RewardScaler

NO = torch.tensor([False, False])


def test_rewards_are_divided_by_the_running_std_of_the_discounted_return_worked_by_hand():
    scaler = RewardScaler(num_envs=2, gamma=0.5)
    # Step 1: G = [1, 3]; the returns so far {1, 3}: variance 1.
    torch.testing.assert_close(scaler(torch.tensor([1.0, 3.0]), NO), torch.tensor([1.0, 3.0]))
    # Step 2: G = [0.5 + 2, 1.5 + 2] = [2.5, 3.5]; {1, 3, 2.5, 3.5}: mean 2.5, variance 0.875.
    # World 0's episode ends here, so its G restarts from 0.
    scaled = scaler(torch.tensor([2.0, 2.0]), torch.tensor([True, False]))
    torch.testing.assert_close(scaled, torch.full((2,), 2.0 / math.sqrt(0.875)))
    # Step 3: G = [0 + 1, 1.75 + 0] = [1, 1.75]; six returns, mean 2.125, variance 5.46875 / 6.
    scaled = scaler(torch.tensor([1.0, 0.0]), NO)
    torch.testing.assert_close(scaled, torch.tensor([1.0 / math.sqrt(5.46875 / 6), 0.0]))
    torch.testing.assert_close(scaler.discounted_return, torch.tensor([1.0, 1.75], dtype=torch.float64))


def test_rows_update_only_their_worlds_and_the_sign_is_kept():
    scaler = RewardScaler(num_envs=3, gamma=0.9)
    scaler(torch.tensor([1.0, -2.0, 4.0]), torch.zeros(3, dtype=torch.bool))
    scaled = scaler(torch.tensor([-3.0]), torch.tensor([False]), rows=slice(1, 2))
    assert scaled.item() < 0
    torch.testing.assert_close(
        scaler.discounted_return, torch.tensor([1.0, -2.0 * 0.9 - 3.0, 4.0], dtype=torch.float64)
    )


def test_first_step_of_one_world_is_clipped():
    scaler = RewardScaler(num_envs=1, gamma=0.99, clip=10.0)
    # One return has no variance: 5 / sqrt(1e-8) would be 50,000.
    assert scaler(torch.tensor([5.0]), torch.tensor([False])).item() == pytest.approx(10.0)


def test_state_dict_round_trip_continues_identically():
    first, second = RewardScaler(2, 0.9), RewardScaler(2, 0.9)
    first(torch.tensor([1.0, 2.0]), NO)
    second.load_state_dict(first.state_dict())
    rewards = torch.tensor([0.5, -1.0])
    torch.testing.assert_close(first(rewards, NO), second(rewards, NO))
