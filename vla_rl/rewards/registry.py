"""Reward models by name (``reward.model``): a table of ``"module:builder"`` paths, imported on use.

A builder is ``builder(path, options) -> RewardModel``: ``path`` is a local model directory (may be
empty for models that need none), ``options`` the model's own settings from the config. A reward
model of your own plugs in as ``"package.module:builder"`` in place of a name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vla_rl.registry import removed_decorator, resolve
from vla_rl.rewards.base import RewardModel

RewardModelBuilder = Callable[[str, dict[str, Any]], RewardModel]

REWARD_MODELS: dict[str, str] = {
    "learned": "vla_rl.rewards.learned:build_learned",
    "contrastive": "vla_rl.rewards.contrastive:build_contrastive",
    "vlm_judge": "vla_rl.rewards.vlm_judge:build_vlm_judge",
}
"""Built-in reward models: name -> ``"module:builder"`` (``contrastive`` and ``vlm_judge`` need
``transformers``, from the VLA extra)."""

register_reward_model = removed_decorator("register_reward_model", "reward.model")

VLA_EXTRA_HINT = "install the VLA extra with pip install -e '.[vla]'"


def registered_reward_models() -> list[str]:
    return sorted(REWARD_MODELS)


def build_reward_model(name: str, path: str = "", options: dict[str, Any] | None = None) -> RewardModel:
    """Build reward model ``name`` (a name of :data:`REWARD_MODELS` or ``"module:builder"``) from the
    local directory ``path``."""
    builder: RewardModelBuilder = resolve(REWARD_MODELS, name, "reward model", missing_hint=VLA_EXTRA_HINT)
    return builder(path, dict(options or {}))
