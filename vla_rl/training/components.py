"""Build the learning parts of a run (policy, rollout storage, collector, algorithm) for an env."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.config.load import ConfigError
from vla_rl.config.schema import TrainConfig
from vla_rl.envs.base import BatchedEnv
from vla_rl.policies import ActorCriticPolicy, build_policy
from vla_rl.policies.obs_keys import obs_key_errors, with_env_obs_keys
from vla_rl.rollout import RolloutBuffer, RolloutCollector
from vla_rl.rollout.reward_scaling import RewardScaler


@dataclass
class TrainingComponents:
    policy: ActorCriticPolicy
    buffer: RolloutBuffer
    collector: RolloutCollector
    algorithm: Any
    """The algorithm object: ``update(buffer) -> dict[str, float]``, ``state_dict()``,
    ``load_state_dict(state)``."""


def resolve_policy_obs_keys(cfg: TrainConfig, observation_space: gym.spaces.Dict) -> None:
    """Fill ``cfg.policy.actor_obs_keys`` in from the env where it is ``None`` (so that the saved
    config names the keys the run used); ``ConfigError`` naming the first key the env lacks."""
    errors = obs_key_errors(cfg.policy, observation_space)
    if errors:
        key, message = errors[0]
        raise ConfigError(f"config key 'policy.{key}': {message}")
    cfg.policy = with_env_obs_keys(cfg.policy, observation_space)


def policy_obs_keys(cfg: TrainConfig) -> list[str]:
    """Observation keys the actor, critic or auxiliary loss read (the only ones the buffer stores)."""
    keys = list(cfg.policy.actor_obs_keys or [])
    for key in [*(cfg.policy.critic_obs_keys or []), cfg.policy.aux_target_key]:
        if key is not None and key not in keys:
            keys.append(key)
    return keys


def build_training_components(cfg: TrainConfig, env: BatchedEnv) -> TrainingComponents:
    policy, buffer, algorithm = build_learner(
        cfg, env.observation_space, env.action_space, env.num_envs, env.device, env.action_scale
    )
    scaler = RewardScaler(env.num_envs, cfg.algorithm.gamma) if cfg.algorithm.normalize_rewards else None
    collector = RolloutCollector(env, policy, buffer, cfg.algorithm.gamma, reward_scaler=scaler)
    return TrainingComponents(policy=policy, buffer=buffer, collector=collector, algorithm=algorithm)


def build_learner(
    cfg: TrainConfig,
    observation_space: gym.spaces.Dict,
    action_space: gym.spaces.Box,
    num_envs: int,
    device: str | torch.device = "cpu",
    action_scale: np.ndarray | None = None,
) -> tuple[ActorCriticPolicy, RolloutBuffer, Any]:
    """Policy, rollout storage and algorithm for ``num_envs`` worlds of the given spaces (no env:
    a learner fed with rollouts collected elsewhere builds just these). Resolves the policy's
    observation keys against ``observation_space`` first (``resolve_policy_obs_keys``).
    ``action_scale`` is the env's (``BatchedEnv.action_scale``): ``policy.init_log_std`` is in the
    env's own action units, so each dimension starts at ``init_log_std - log(action_scale)``."""
    from vla_rl.algorithms import build_algorithm

    resolve_policy_obs_keys(cfg, observation_space)
    policy = build_policy(cfg.policy, observation_space, action_space).to(device)
    if action_scale is not None:
        with torch.no_grad():
            scale = torch.as_tensor(action_scale, dtype=policy.log_std.dtype, device=policy.log_std.device)
            policy.log_std -= scale.log().repeat(policy.chunk_len)
    buffer = RolloutBuffer(
        cfg.algorithm.num_steps,
        num_envs,
        observation_space,
        int(action_space.shape[0]),
        device=device,
        obs_keys=policy_obs_keys(cfg),
    )
    algorithm = build_algorithm(cfg.algorithm, policy)
    generator = getattr(algorithm, "generator", None)
    if isinstance(generator, torch.Generator):
        generator.manual_seed(cfg.seed)
    return policy, buffer, algorithm
