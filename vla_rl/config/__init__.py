"""Typed configuration: the machinery (``structured``: ``ConfigError``, checks, Hydra composition)
and the schemas of runs (``schema``: ``RunConfig``, ``TrainConfig``) with the one path that composes,
loads and validates every job's config (``load``: ``JobSchema``).

The names below are imported on first use, so ``from vla_rl.config import ConfigError`` loads only
``vla_rl.config.structured``, not the schemas of every layer that ``TrainConfig`` composes.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ConfigError": "vla_rl.config.structured",
    "TrainConfig": "vla_rl.config.schema",
    "compose_train_config": "vla_rl.config.load",
    "load_train_config_file": "vla_rl.config.load",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'vla_rl.config' has no attribute {name!r}")
