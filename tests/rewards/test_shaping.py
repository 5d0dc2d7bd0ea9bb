"""Potential-based shaping and the weighted reward sum."""

from __future__ import annotations

import torch
from reward_fixtures import make_camera_env, make_learned_model

from vla_rl.rewards.config import RewardConfig
from vla_rl.rewards.env_wrapper import RewardModelEnv
from vla_rl.rewards.shaping import combine_rewards, potential_shaping


def test_potential_shaping_by_hand() -> None:
    # 0.9 * 0.5 - 0.2 = 0.25 and 0.9 * 0.0 - 1.0 = -1.0
    torch.testing.assert_close(
        potential_shaping(torch.tensor([0.2, 1.0]), torch.tensor([0.5, 0.0]), 0.9), torch.tensor([0.25, -1.0])
    )


def test_weighted_sum_with_success_bonus() -> None:
    reward = combine_rewards(
        env_reward=torch.tensor([1.0, 2.0, 3.0]),
        model_term=torch.tensor([0.5, 0.5, 0.5]),
        env_weight=0.5,
        model_weight=2.0,
        success_probability=torch.tensor([0.2, 0.5, 0.9]),
        success_bonus=10.0,
        success_threshold=0.5,
    )
    # 0.5 * r_env + 2 * 0.5, plus 10 where p >= 0.5
    torch.testing.assert_close(reward, torch.tensor([1.5, 12.0, 12.5]))
    torch.testing.assert_close(
        combine_rewards(torch.tensor([1.0]), torch.tensor([3.0]), 0.0, 1.0), torch.tensor([3.0])
    )


def test_shaped_rewards_of_an_episode_sum_to_the_potential_difference() -> None:
    """With gamma 1 the terms telescope: the episode's sum is phi(last frame) - phi(first frame)."""
    model = make_learned_model()
    cfg = RewardConfig(model="learned", env_weight=0.0, shaping="potential", gamma=1.0)
    env = RewardModelEnv(make_camera_env(num_envs=2), model, cfg)
    try:
        obs, _ = env.reset(seed=3)
        phi_first = model.score(obs["rgb_front"], obs["instruction"])
        generator = torch.Generator().manual_seed(0)
        total = torch.zeros(2)
        for _ in range(env.max_episode_steps):
            result = env.step(torch.rand(2, env.action_dim, generator=generator) * 2 - 1)
            total += result.reward
        assert bool(result.done.all())
        final = result.info["final_obs"]
        phi_last = model.score(final["rgb_front"], final["instruction"])
        torch.testing.assert_close(total, phi_last - phi_first, atol=1e-5, rtol=0)
        assert bool((phi_last != phi_first).all()), "the arm moved, so the potential should change"
    finally:
        env.close()
