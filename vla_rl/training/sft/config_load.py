"""Compose ``configs/sft.yaml`` with Hydra and validate it against ``SFTConfig`` before any work starts.

An unknown key, a wrong type or an out-of-range value is a ``ConfigError`` naming the dotted key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from vla_rl.config.load import ConfigError, _override_error, compose_config_module
from vla_rl.training.sft.config import SFTConfig

SFT_CONFIG_NAME = "sft"


def compose_sft_config(overrides: Sequence[str] = ()) -> SFTConfig:
    """``configs/sft.yaml`` plus Hydra-syntax ``overrides`` (``data.path=... optim.learning_rate=3e-4``)."""
    return validate_sft_config(compose_config_module(SFT_CONFIG_NAME, overrides))


def load_sft_config_file(path: str | Path, overrides: Sequence[str] = ()) -> SFTConfig:
    """A resolved ``config.yaml`` (as written into SFT checkpoints) with ``overrides`` applied."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    if not overrides:
        return validate_sft_config(OmegaConf.load(path))
    try:
        with initialize_config_dir(config_dir=str(path.parent), version_base="1.3"):
            composed = compose(config_name=path.stem, overrides=list(overrides))
    except HydraException as error:
        raise _override_error(error) from None
    return validate_sft_config(composed)


def validate_sft_config(raw: DictConfig | dict[str, Any]) -> SFTConfig:
    """Merge ``raw`` into the schema (unknown keys and wrong types fail) and check value ranges."""
    if not isinstance(raw, DictConfig):
        raw = OmegaConf.create(raw)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(SFTConfig), raw)
        config: SFTConfig = OmegaConf.to_object(merged)
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", None) or "?"
        reason = str(error).splitlines()[0]
        if "not in" in reason:
            raise ConfigError(f"unknown config key '{key}' ({reason})") from None
        raise ConfigError(f"config key '{key}': {reason}") from None
    for check in SFT_CHECKS:
        if not check.holds(config):
            value = OmegaConf.select(OmegaConf.structured(config), check.key)
            raise ConfigError(f"config key '{check.key}': {check.message} (got {value!r})")
    return config


@dataclass(frozen=True)
class _Check:
    key: str
    holds: Callable[[SFTConfig], bool]
    message: str


SFT_CHECKS: list[_Check] = [
    _Check("policy.name", lambda c: bool(c.policy.name), "must name a registered chunk policy"),
    _Check("steps", lambda c: c.steps > 0, "must be positive"),
    _Check("batch_size", lambda c: c.batch_size > 0, "must be positive"),
    _Check("checkpoint_interval", lambda c: c.checkpoint_interval > 0, "must be positive"),
    _Check("torch_num_threads", lambda c: c.torch_num_threads > 0, "must be positive"),
    _Check("optim.learning_rate", lambda c: c.optim.learning_rate > 0, "must be positive"),
    _Check("optim.weight_decay", lambda c: c.optim.weight_decay >= 0, "must not be negative"),
    _Check(
        "optim.betas",
        lambda c: len(c.optim.betas) == 2 and all(0 <= b < 1 for b in c.optim.betas),
        "must be two values in [0, 1)",
    ),
    _Check("optim.warmup_steps", lambda c: c.optim.warmup_steps >= 0, "must not be negative"),
    _Check("optim.min_lr_ratio", lambda c: 0 <= c.optim.min_lr_ratio <= 1, "must be in [0, 1]"),
    _Check("optim.grad_accum_steps", lambda c: c.optim.grad_accum_steps > 0, "must be positive"),
    _Check(
        "data.action_quantiles",
        lambda c: (
            len(c.data.action_quantiles) == 2
            and 0 <= c.data.action_quantiles[0] < c.data.action_quantiles[1] <= 1
        ),
        "must be two increasing values in [0, 1]",
    ),
    _Check("eval.temperature", lambda c: c.eval.temperature > 0, "must be positive"),
    _Check("env.num_envs", lambda c: c.env.num_envs > 0, "must be positive"),
    _Check("env.image_size", lambda c: c.env.image_size > 0, "must be positive"),
    _Check(
        "logger.wandb_mode",
        lambda c: c.logger.wandb_mode in ("offline", "online", "disabled"),
        "must be 'offline', 'online' or 'disabled'",
    ),
    _Check("logger.log_interval", lambda c: c.logger.log_interval > 0, "must be positive"),
    _Check(
        "success_target",
        lambda c: c.success_target is None or 0 <= c.success_target <= 1,
        "must be in [0, 1]",
    ),
]
