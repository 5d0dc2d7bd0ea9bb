"""``RewardModelEnv``: what it pays, when it scores, and the background worker."""

from __future__ import annotations

import pytest
import torch
from reward_fixtures import make_camera_env, make_learned_model

from vla_rl.config import ConfigError, compose_train_config
from vla_rl.policies import build_policy
from vla_rl.policies.config import PolicyConfig
from vla_rl.rewards.config import RewardConfig
from vla_rl.rewards.env_wrapper import RewardModelEnv
from vla_rl.rollout import RolloutBuffer, RolloutCollector


def wrapped(num_envs: int = 2, **overrides: object) -> RewardModelEnv:
    cfg = RewardConfig(**{"model": "learned", "env_weight": 0.0, **overrides})
    return RewardModelEnv(make_camera_env(num_envs=num_envs), make_learned_model(), cfg)


def actions(env: RewardModelEnv, seed: int) -> torch.Tensor:
    return torch.rand(env.num_envs, env.action_dim, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def test_reward_is_the_score_of_the_frame_each_world_reached() -> None:
    env = wrapped()
    try:
        env.reset(seed=0)
        for step in range(3):
            result = env.step(actions(env, step))
            final = result.info["final_obs"]
            torch.testing.assert_close(
                result.reward, env.model.score(final["rgb_front"], final["instruction"])
            )
    finally:
        env.close()


def test_weights_mix_environment_and_model() -> None:
    model_only, env_only = wrapped(), wrapped(env_weight=1.0, model_weight=0.0)
    try:
        for env in (model_only, env_only):
            env.reset(seed=0)
        a, b = model_only.step(actions(model_only, 0)), env_only.step(actions(env_only, 0))
        raw = env_only.env.task.reward_and_success(env_only.env._task_state())[0]
        torch.testing.assert_close(b.reward, torch.as_tensor(raw, dtype=torch.float32))
        assert not torch.allclose(a.reward, b.reward)
    finally:
        model_only.close()
        env_only.close()


def test_every_k_pays_each_score_for_the_steps_it_stands_for() -> None:
    every_step, every_3 = wrapped(), wrapped(frequency="every_k", every_k=3)
    try:
        for env in (every_step, every_3):
            env.reset(seed=0)
        for step in range(1, 8):
            a, b = every_step.step(actions(every_step, step)), every_3.step(actions(every_3, step))
            expected = 3 * a.reward if step % 3 == 0 else torch.zeros(2)
            torch.testing.assert_close(b.reward, expected)
    finally:
        every_step.close()
        every_3.close()


def test_episode_end_scores_only_the_last_frame() -> None:
    env = wrapped(frequency="episode_end")
    try:
        env.reset(seed=0)
        for step in range(env.max_episode_steps):
            result = env.step(actions(env, step))
            if not bool(result.done.any()):
                assert bool((result.reward == 0).all())
        final = result.info["final_obs"]
        torch.testing.assert_close(result.reward, env.model.score(final["rgb_front"], final["instruction"]))
        assert "env_return" in result.info["episode"]
        torch.testing.assert_close(result.info["episode"]["return"], result.reward)
    finally:
        env.close()


def test_background_worker_stores_the_same_rewards() -> None:
    """Scoring in the worker thread fills the rollout with the rewards synchronous scoring gives."""
    rewards = []
    for worker in (False, True):
        env = wrapped(num_envs=2, worker=worker, shaping="potential")
        try:
            torch.manual_seed(0)
            policy = build_policy(PolicyConfig(), env.observation_space, env.action_space)
            buffer = RolloutBuffer(6, 2, env.observation_space, env.action_dim, obs_keys=["proprio"])
            collector = RolloutCollector(env, policy, buffer, gamma=0.99)
            obs, _ = env.reset(seed=1)
            torch.manual_seed(1)
            collector.collect(obs)
            rewards.append(buffer.rewards.clone())
        finally:
            env.close()
    torch.testing.assert_close(rewards[0], rewards[1])
    assert bool((rewards[0] != 0).any())


def test_missing_camera_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"reward.cameras.*not rendered"):
        compose_train_config(["reward=learned", "reward.path=somewhere"])
    with pytest.raises(ConfigError, match="reward.frequency"):
        compose_train_config(
            ["reward=learned", "reward.path=x", "env.cameras=[front,wrist]", "reward.frequency=sometimes"]
        )
    with pytest.raises(ValueError, match="does not render"):
        RewardModelEnv(
            make_camera_env(cameras=("front",)), make_learned_model(), RewardConfig(cameras=["wrist"])
        )


def test_snapshot_restores_the_potentials_for_an_exact_resume() -> None:
    env = wrapped(shaping="potential")
    try:
        env.reset(seed=2)
        for step in range(3):
            env.step(actions(env, step))
        state = env.state_dict()
        first = [env.step(actions(env, step)).reward for step in (10, 11)]
        env.load_state_dict(state)
        again = [env.step(actions(env, step)).reward for step in (10, 11)]
    finally:
        env.close()
    for a, b in zip(first, again, strict=True):
        torch.testing.assert_close(a, b)


def test_success_bonus_is_paid_where_the_model_calls_the_frame_done() -> None:
    env = wrapped(success_bonus=2.0, success_threshold=0.5)
    try:
        env.reset(seed=0)
        result = env.step(actions(env, 0))
        final = result.info["final_obs"]
        frames, texts = final["rgb_front"], final["instruction"]
        done = env.model.success_probability(frames, texts) >= 0.5
        torch.testing.assert_close(result.reward, env.model.score(frames, texts) + 2.0 * done.float())
    finally:
        env.close()
