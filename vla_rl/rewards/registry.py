"""Reward-model name -> builder registry, so configs pick reward models by name."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from vla_rl.rewards.base import RewardModel

RewardModelBuilder = Callable[[str, dict[str, Any]], RewardModel]
"""``builder(path, options)``: ``path`` is a local model directory (may be empty for models that
need none), ``options`` the model's own settings from the config."""
_REWARD_MODELS: dict[str, RewardModelBuilder] = {}


def register_reward_model(name: str) -> Callable[[RewardModelBuilder], RewardModelBuilder]:
    """Decorator: ``@register_reward_model("contrastive")`` on a ``builder(path, options)``."""

    def decorator(builder: RewardModelBuilder) -> RewardModelBuilder:
        if name in _REWARD_MODELS and _REWARD_MODELS[name] is not builder:
            raise ValueError(f"reward model {name!r} is already registered")
        _REWARD_MODELS[name] = builder
        return builder

    return decorator


BUILTIN_MODULES = {
    "learned": "vla_rl.rewards.learned",
    "contrastive": "vla_rl.rewards.contrastive",
    "vlm_judge": "vla_rl.rewards.vlm_judge",
}
"""Modules of the built-in reward models, imported when one is first built (two need ``transformers``)."""


def registered_reward_models() -> list[str]:
    return sorted(set(_REWARD_MODELS) | set(BUILTIN_MODULES))


def build_reward_model(name: str, path: str = "", options: dict[str, Any] | None = None) -> RewardModel:
    """Build the reward model registered as ``name`` from the local directory ``path``."""
    if name not in _REWARD_MODELS and name in BUILTIN_MODULES:
        _import_builtin(BUILTIN_MODULES[name])
    if name not in _REWARD_MODELS:
        raise ValueError(f"unknown reward model {name!r}; registered: {registered_reward_models()}")
    return _REWARD_MODELS[name](path, dict(options or {}))


def _import_builtin(module: str) -> None:
    # Importing the module runs its @register_reward_model decorator.
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] == "vla_rl":
            raise
        raise ModuleNotFoundError(
            f"{module} needs {error.name!r}: install the VLA extra with pip install -e '.[vla]'"
        ) from error
