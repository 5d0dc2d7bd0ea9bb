"""Typed configuration: schemas, Hydra composition and validation."""

from vla_rl.config.load import (
    ConfigError,
    compose_train_config,
    load_train_config_file,
    validate_train_config,
)
from vla_rl.config.schema import EvalConfig, LoggerConfig, TrainConfig

__all__ = [
    "ConfigError",
    "EvalConfig",
    "LoggerConfig",
    "TrainConfig",
    "compose_train_config",
    "load_train_config_file",
    "validate_train_config",
]
