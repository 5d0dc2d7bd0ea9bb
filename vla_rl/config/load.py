"""Compose Hydra configs and validate them against the typed schema before any work starts."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vla_rl.algorithms.config import LR_SCHEDULES
from vla_rl.config.schema import TrainConfig
from vla_rl.rewards.config import REWARD_MODEL_OPTIONS, REWARD_OPTIONS_KEY, RewardConfig, reward_config_errors

ConfigT = TypeVar("ConfigT")


class ConfigError(ValueError):
    """A configuration problem, with the dotted key it concerns."""


def compose_train_config(overrides: Sequence[str] = (), config_name: str = "train") -> TrainConfig:
    """Compose ``configs/<config_name>.yaml`` with command-line ``overrides`` and validate it."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    try:
        with initialize_config_module(config_module="vla_rl.configs", version_base="1.3"):
            composed = compose(config_name=config_name, overrides=list(overrides))
    except HydraException as error:
        raise _override_error(error) from None
    return validate_train_config(composed)


def compose_config_module(config_name: str, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose ``configs/<config_name>.yaml`` with ``overrides`` without validating it (for
    configs of other jobs, e.g. ``eval``)."""
    from hydra import compose, initialize_config_module
    from hydra.errors import HydraException

    try:
        with initialize_config_module(config_module="vla_rl.configs", version_base="1.3"):
            return compose(config_name=config_name, overrides=list(overrides))
    except HydraException as error:
        raise _override_error(error) from None


def load_train_config_file(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Load a resolved ``config.yaml`` (as written into checkpoints), apply Hydra-syntax
    ``overrides`` (e.g. ``eval.num_episodes=10``) and validate it."""
    return load_config_file(path, overrides, validate_train_config)


def load_config_file(
    path: str | Path, overrides: Sequence[str], validate: Callable[[DictConfig], ConfigT]
) -> ConfigT:
    """Load a resolved config file of any job, apply Hydra-syntax ``overrides`` and ``validate`` it."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if not overrides:
        return validate(OmegaConf.load(path))
    try:
        with initialize_config_dir(config_dir=str(path.parent), version_base="1.3"):
            composed = compose(config_name=path.stem, overrides=list(overrides))
    except HydraException as error:
        raise _override_error(error) from None
    return validate(composed)


def _override_error(error: Exception) -> ConfigError:
    message = str(error)
    unknown = re.search(r"Could not override '([^']+)'", message)
    if unknown:
        return ConfigError(f"unknown config key '{unknown.group(1)}' (check the spelling)")
    return ConfigError(f"invalid configuration override: {message}")


@dataclass(frozen=True)
class Check(Generic[ConfigT]):
    """One value-range rule of a config: ``holds(config)`` must be true, else ``key``: ``message``."""

    key: str
    holds: Callable[[ConfigT], bool]
    message: str


def validate_structured(
    schema: type[ConfigT],
    raw: DictConfig | dict[str, Any],
    checks: Sequence[Check[ConfigT]],
    prefix: str = "",
) -> ConfigT:
    """Merge ``raw`` into the dataclass ``schema`` (unknown keys and wrong types fail), then apply
    ``checks`` in order; the first one that fails is a ``ConfigError`` naming its dotted key, below
    ``prefix`` (e.g. ``reward.options``) when the schema is one group of a larger config. With a
    ``prefix``, a ``ValueError`` of the schema's ``__post_init__`` is a ``ConfigError`` naming the
    field its message starts with (else ``prefix``)."""
    if not isinstance(raw, DictConfig):
        raw = OmegaConf.create(raw)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), raw)
        config: ConfigT = OmegaConf.to_object(merged)
    except OmegaConfBaseException as error:
        key = _full_key(prefix, getattr(error, "full_key", None) or "?")
        reason = str(error).splitlines()[0]
        if "not in" in reason:
            raise ConfigError(f"unknown config key '{key}' ({reason})") from None
        raise ConfigError(f"config key '{key}': {reason}") from None
    except ValueError as error:
        if not prefix:
            raise
        raise ConfigError(f"config key '{_post_init_key(schema, prefix, str(error))}': {error}") from None
    for check in checks:
        if not check.holds(config):
            value = OmegaConf.select(OmegaConf.structured(config), check.key)
            raise ConfigError(f"config key '{_full_key(prefix, check.key)}': {check.message} (got {value!r})")
    return config


@dataclass(frozen=True)
class Schema(Generic[ConfigT]):
    """A dataclass of settings and the value checks applied after merging into it: the typed
    options of one reward model or the build settings of one policy family."""

    type: type[ConfigT]
    checks: Sequence[Check[ConfigT]] = ()

    def validate(self, raw: DictConfig | dict[str, Any], prefix: str) -> ConfigT:
        """``raw`` as an instance of ``type``; ``ConfigError`` naming the key below ``prefix``."""
        return validate_structured(self.type, raw, self.checks, prefix)


def resolve_attribute(target: str) -> Any:
    """The object a ``"module:attribute"`` string names (the module is imported on use)."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _post_init_key(schema: type, prefix: str, message: str) -> str:
    """The key a ``__post_init__`` error concerns: the field its message starts with, else ``prefix``."""
    first_word = message.split(" ", 1)[0]
    names = {field.name for field in fields(schema)} if is_dataclass(schema) else set()
    return _full_key(prefix, first_word) if first_word in names else prefix


def _full_key(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


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
        schema: Schema[Any] = resolve_attribute(REWARD_MODEL_OPTIONS[reward.model])
        schema.validate(reward.options, REWARD_OPTIONS_KEY)
    elif reward.model:
        from vla_rl.rewards.registry import registered_reward_models

        if reward.model not in registered_reward_models():
            raise ConfigError(
                f"config key 'reward.model': unknown reward model {reward.model!r}; "
                f"registered: {registered_reward_models()}"
            )


TRAIN_CHECKS: list[Check[TrainConfig]] = [
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
