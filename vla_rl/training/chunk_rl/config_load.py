"""Compose ``configs/rl.yaml`` with Hydra and validate it against ``VLARLConfig`` before any work."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vla_rl.config.load import (
    Check,
    ConfigError,
    check_reward_config,
    compose_config_module,
    load_config_file,
    validate_structured,
)
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.chunk_rl.exploration_anneal import check_exploration_anneal

RL_CONFIG_NAME = "rl"


def compose_rl_config(overrides: Sequence[str] = ()) -> VLARLConfig:
    """``configs/rl.yaml`` (a recipe from ``configs/recipe``) plus Hydra-syntax ``overrides``."""
    return validate_rl_config(compose_config_module(RL_CONFIG_NAME, overrides))


def load_rl_config_file(path: str | Path, overrides: Sequence[str] = ()) -> VLARLConfig:
    """A resolved ``config.yaml`` (as written into RL checkpoints) with ``overrides`` applied."""
    return load_config_file(path, overrides, validate_rl_config)


def validate_rl_config(raw: DictConfig | dict[str, Any]) -> VLARLConfig:
    cfg = validate_structured(VLARLConfig, raw, RL_CHECKS)
    try:
        cfg.algorithm.validate()
    except ValueError as error:
        raise ConfigError(f"config key 'algorithm': {error}") from None
    check_reward_config(cfg.reward, cfg.env.cameras)
    try:
        check_exploration_anneal(
            cfg.policy.exploration, cfg.policy.exploration_final, cfg.policy.exploration_anneal_minutes
        )
    except ValueError as error:
        raise ConfigError(f"config key 'policy': {error}") from None
    return cfg


RL_CHECKS: list[Check[VLARLConfig]] = [
    Check("policy.name", lambda c: bool(c.policy.name), "must name a registered chunk policy"),
    Check(
        "policy.init_from",
        lambda c: bool(c.policy.init_from) or bool(c.resume),
        "must point at the SFT checkpoint to fine-tune",
    ),
    Check("iterations", lambda c: c.iterations > 0, "must be positive"),
    Check(
        "reward.worker",
        lambda c: not (c.reward.model and c.reward.worker),
        "background scoring is supported by the PPO collector of `vla-rl train` only",
    ),
    Check(
        "algorithm.reward",
        lambda c: not c.reward.model or c.algorithm.name != "vla_ppo" or c.algorithm.reward == "dense",
        "must be 'dense' with a reward model (the model's reward replaces the step reward)",
    ),
    Check(
        "algorithm.score",
        lambda c: not c.reward.model or c.algorithm.name != "vla_grpo" or c.algorithm.score != "success",
        "must be 'return' or 'return_to_go' with a reward model (success would ignore the model)",
    ),
    Check(
        "eval.temperature",
        lambda c: c.eval.temperature is None or c.eval.temperature > 0,
        "must be positive, or null for the rollouts' algorithm.temperature",
    ),
    Check("checkpoint_interval", lambda c: c.checkpoint_interval > 0, "must be positive"),
    Check("torch_num_threads", lambda c: c.torch_num_threads > 0, "must be positive"),
    Check("env.num_envs", lambda c: c.env.num_envs > 0, "must be positive"),
    Check(
        "env.num_envs",
        lambda c: c.algorithm.name != "vla_grpo" or c.env.num_envs % c.algorithm.group_size == 0,
        "must be a multiple of algorithm.group_size for GRPO",
    ),
    Check(
        "logger.wandb_mode",
        lambda c: c.logger.wandb_mode in ("offline", "online", "disabled"),
        "must be 'offline', 'online' or 'disabled'",
    ),
    Check(
        "success_target",
        lambda c: c.success_target is None or 0 <= c.success_target <= 1,
        "must be in [0, 1]",
    ),
]
