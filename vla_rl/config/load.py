"""Compose a training run's config (``configs/train.yaml``) and validate it against ``TrainConfig``
before any work starts. The typed-config machinery itself is ``vla_rl.config.structured``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vla_rl.algorithms.config import LR_SCHEDULES
from vla_rl.config.schema import TrainConfig
from vla_rl.config.structured import (  # noqa: F401 - re-exported: callers import them from here too
    Check,
    ConfigError,
    Schema,
    compose_config_module,
    load_config_file,
    override_error,
    validate_structured,
)
from vla_rl.registry import is_import_path, resolve
from vla_rl.rewards.config import REWARD_MODEL_OPTIONS, REWARD_OPTIONS_KEY, RewardConfig, reward_config_errors


def compose_train_config(overrides: Sequence[str] = (), config_name: str = "train") -> TrainConfig:
    """Compose ``configs/<config_name>.yaml`` with command-line ``overrides`` and validate it."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    try:
        with initialize_config_module(config_module="vla_rl.configs", version_base="1.3"):
            composed = compose(config_name=config_name, overrides=list(overrides))
    except HydraException as error:
        raise override_error(error) from None
    return validate_train_config(composed)


def load_train_config_file(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Load a resolved ``config.yaml`` (as written into checkpoints), apply Hydra-syntax
    ``overrides`` (e.g. ``eval.num_episodes=10``) and validate it."""
    return load_config_file(path, overrides, validate_train_config)


def validate_train_config(raw: DictConfig | dict[str, Any]) -> TrainConfig:
    """Merge ``raw`` into ``TrainConfig`` (unknown keys and wrong types fail) and check values."""
    config = validate_structured(TrainConfig, raw, TRAIN_CHECKS)
    check_reward_config(config.reward, config.env.cameras)
    if config.env.backend == "gymnasium":
        from vla_rl.envs.gym_adapter import unknown_task_reason

        reason = unknown_task_reason(config.env.task)
        if reason is not None:
            raise ConfigError(f"config key 'env.task': {reason}")
    if config.policy.hidden_sizes is None:
        from vla_rl.sims.tasks.registry import default_policy_hidden_sizes

        task_sizes = default_policy_hidden_sizes(config.env.task)
        config.policy.hidden_sizes = task_sizes if task_sizes is not None else config.policy.head_sizes()
    return config


def check_reward_config(reward: RewardConfig, env_cameras: list[str]) -> None:
    """``ConfigError`` for the first invalid value of a ``reward`` group, its model's options
    included (checked against the model's typed options, nothing loads)."""
    errors = reward_config_errors(reward, env_cameras)
    if errors:
        key, message = errors[0]
        raise ConfigError(f"config key '{key}': {message}")
    if reward.model in REWARD_MODEL_OPTIONS:
        schema: Schema[Any] = resolve(REWARD_MODEL_OPTIONS, reward.model, "reward model options")
        schema.validate(reward.options, REWARD_OPTIONS_KEY)
    elif reward.model and not is_import_path(reward.model):
        from vla_rl.rewards.registry import REWARD_MODELS

        if reward.model not in REWARD_MODELS:
            raise ConfigError(
                f"config key 'reward.model': unknown reward model {reward.model!r}; known: "
                f"{', '.join(sorted(REWARD_MODELS))} (or your own as 'package.module:builder')"
            )


def job_check(job: str) -> Check[Any]:
    """``job`` is the command's: ``vla-rl train`` runs ``ppo``, or ``rl`` given ``recipe=NAME``;
    ``vla-rl sft`` runs ``sft``."""
    return Check(
        "job",
        lambda c: c.job == job,
        f"is {job!r} here: `vla-rl train` runs 'ppo', `vla-rl train recipe=NAME` 'rl', `vla-rl sft` 'sft'",
    )


TRAIN_CHECKS: list[Check[TrainConfig]] = [
    job_check("ppo"),
    Check("env.num_envs", lambda c: c.env.num_envs > 0, "must be positive"),
    Check("env.control_hz", lambda c: c.env.control_hz > 0, "must be positive"),
    Check(
        "env.physics_dt_s",
        lambda c: 0 < c.env.physics_dt_s <= 1.0 / c.env.control_hz,
        "must be positive and at most one control period",
    ),
    Check("env.image_size", lambda c: c.env.image_size > 0, "must be positive"),
    Check("env.num_threads", lambda c: c.env.num_threads > 0, "must be positive"),
    Check("env.pipeline_stages", lambda c: c.env.pipeline_stages > 0, "must be positive"),
    Check(
        "distributed.runtime",
        lambda c: c.distributed.runtime in ("inprocess", "ray"),
        "must be 'inprocess' or 'ray'",
    ),
    Check("distributed.env_workers", lambda c: c.distributed.env_workers >= 0, "must be >= 0"),
    Check(
        "distributed.env_workers",
        lambda c: c.env.num_envs % (max(c.distributed.env_workers, 1) * c.env.pipeline_stages) == 0,
        "times env.pipeline_stages must divide env.num_envs",
    ),
    Check("distributed.trainer_ranks", lambda c: c.distributed.trainer_ranks >= 0, "must be >= 0"),
    Check(
        "distributed.placement.mode",
        lambda c: c.distributed.placement.mode == "none" or c.distributed.runtime == "ray",
        "a GPU placement needs distributed.runtime=ray",
    ),
    Check(
        "distributed.trainer_ranks",
        lambda c: c.distributed.trainer_ranks <= 1 or c.distributed.runtime == "ray",
        "more than one rank needs distributed.runtime=ray",
    ),
    Check(
        "distributed.trainer_ranks",
        lambda c: c.distributed.trainer_ranks == 0 or c.algorithm.name == "ppo",
        "runs the 'ppo' algorithm only",
    ),
    Check(
        "distributed.trainer_ranks",
        lambda c: (
            c.distributed.trainer_ranks == 0
            or (c.algorithm.num_steps * c.env.num_envs // max(c.algorithm.num_minibatches, 1))
            % c.distributed.trainer_ranks
            == 0
        ),
        "must divide the minibatch size (num_steps * env.num_envs / num_minibatches)",
    ),
    Check(
        "policy.image_encoder",
        lambda c: c.policy.image_encoder in _image_encoder_names(),
        "must be 'conv' or 'spatial_softmax'",
    ),
    Check("algorithm.num_steps", lambda c: c.algorithm.num_steps > 0, "must be positive"),
    Check("algorithm.num_epochs", lambda c: c.algorithm.num_epochs > 0, "must be positive"),
    Check(
        "algorithm.num_minibatches",
        lambda c: (
            c.algorithm.num_minibatches > 0
            and (c.algorithm.num_steps * c.env.num_envs) % c.algorithm.num_minibatches == 0
        ),
        "must be positive and divide num_steps * env.num_envs",
    ),
    Check("algorithm.gamma", lambda c: 0 < c.algorithm.gamma <= 1, "must be in (0, 1]"),
    Check("algorithm.gae_lambda", lambda c: 0 <= c.algorithm.gae_lambda <= 1, "must be in [0, 1]"),
    Check("algorithm.clip_ratio", lambda c: c.algorithm.clip_ratio > 0, "must be positive"),
    Check("algorithm.learning_rate", lambda c: c.algorithm.learning_rate > 0, "must be positive"),
    Check(
        "algorithm.lr_schedule",
        lambda c: c.algorithm.lr_schedule in LR_SCHEDULES,
        "must be one of " + ", ".join(repr(name) for name in LR_SCHEDULES),
    ),
    Check(
        "algorithm.lr_decay_iterations",
        lambda c: c.algorithm.lr_schedule != "linear" or c.algorithm.lr_decay_iterations > 0,
        "must be positive with lr_schedule 'linear'",
    ),
    Check(
        "logger.wandb_mode",
        lambda c: c.logger.wandb_mode in ("offline", "online", "disabled"),
        "must be 'offline', 'online' or 'disabled'",
    ),
    Check("logger.log_interval", lambda c: c.logger.log_interval > 0, "must be positive"),
    Check("total_env_steps", lambda c: c.total_env_steps > 0, "must be positive"),
    Check("checkpoint_interval", lambda c: c.checkpoint_interval > 0, "must be positive"),
    Check("eval.num_episodes", lambda c: c.eval.num_episodes >= 0, "must not be negative"),
    Check("torch_num_threads", lambda c: c.torch_num_threads > 0, "must be positive"),
    Check(
        "success_target",
        lambda c: c.success_target is None or 0 <= c.success_target <= 1,
        "must be in [0, 1]",
    ),
]


def _image_encoder_names() -> list[str]:
    from vla_rl.policies.cnn import IMAGE_ENCODERS

    return sorted(IMAGE_ENCODERS)
