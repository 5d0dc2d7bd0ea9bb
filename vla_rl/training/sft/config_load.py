"""Compose ``configs/sft.yaml`` with Hydra and validate it against ``SFTConfig`` before any work starts.

An unknown key, a wrong type or an out-of-range value is a ``ConfigError`` naming the dotted key.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from vla_rl.config.load import Check, compose_config_module, job_check, load_config_file, validate_structured
from vla_rl.training.sft.config import SFTConfig
from vla_rl.training.sft.policy_settings import check_policy_kwargs

SFT_CONFIG_NAME = "sft"


def compose_sft_config(overrides: Sequence[str] = ()) -> SFTConfig:
    """``configs/sft.yaml`` plus Hydra-syntax ``overrides`` (``data.path=... optim.learning_rate=3e-4``)."""
    return validate_sft_config(compose_config_module(SFT_CONFIG_NAME, overrides))


def load_sft_config_file(path: str | Path, overrides: Sequence[str] = ()) -> SFTConfig:
    """A resolved ``config.yaml`` (as written into SFT checkpoints) with ``overrides`` applied."""
    return load_config_file(path, overrides, validate_sft_config)


def validate_sft_config(raw: DictConfig | dict[str, Any]) -> SFTConfig:
    """Merge ``raw`` into ``SFTConfig`` (unknown keys and wrong types fail) and check value ranges,
    ``policy.kwargs`` against the family's typed settings (``policy_settings``)."""
    cfg = validate_structured(SFTConfig, raw, SFT_CHECKS)
    check_policy_kwargs(cfg.policy.name, cfg.policy.kwargs)
    return cfg


SFT_CHECKS: list[Check[SFTConfig]] = [
    job_check("sft"),
    Check("policy.name", lambda c: bool(c.policy.name), "must name a registered chunk policy"),
    Check("steps", lambda c: c.steps > 0, "must be positive"),
    Check("batch_size", lambda c: c.batch_size > 0, "must be positive"),
    Check("checkpoint_interval", lambda c: c.checkpoint_interval > 0, "must be positive"),
    Check("torch_num_threads", lambda c: c.torch_num_threads > 0, "must be positive"),
    Check("optim.learning_rate", lambda c: c.optim.learning_rate > 0, "must be positive"),
    Check("optim.weight_decay", lambda c: c.optim.weight_decay >= 0, "must not be negative"),
    Check(
        "optim.betas",
        lambda c: len(c.optim.betas) == 2 and all(0 <= b < 1 for b in c.optim.betas),
        "must be two values in [0, 1)",
    ),
    Check("optim.warmup_steps", lambda c: c.optim.warmup_steps >= 0, "must not be negative"),
    Check("optim.min_lr_ratio", lambda c: 0 <= c.optim.min_lr_ratio <= 1, "must be in [0, 1]"),
    Check("optim.grad_accum_steps", lambda c: c.optim.grad_accum_steps > 0, "must be positive"),
    Check(
        "data.action_quantiles",
        lambda c: (
            len(c.data.action_quantiles) == 2
            and 0 <= c.data.action_quantiles[0] < c.data.action_quantiles[1] <= 1
        ),
        "must be two increasing values in [0, 1]",
    ),
    Check("eval.temperature", lambda c: c.eval.temperature > 0, "must be positive"),
    Check("env.num_envs", lambda c: c.env.num_envs > 0, "must be positive"),
    Check("env.image_size", lambda c: c.env.image_size > 0, "must be positive"),
    Check(
        "logger.wandb_mode",
        lambda c: c.logger.wandb_mode in ("offline", "online", "disabled"),
        "must be 'offline', 'online' or 'disabled'",
    ),
    Check("logger.log_interval", lambda c: c.logger.log_interval > 0, "must be positive"),
    Check(
        "success_target",
        lambda c: c.success_target is None or 0 <= c.success_target <= 1,
        "must be in [0, 1]",
    ),
]
