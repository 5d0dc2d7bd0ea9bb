"""A flow policy's exploration noise moved linearly over the run's updates.

``policy.exploration`` sets where the noise starts; ``policy.exploration_final`` names the numeric
settings to move and where they end (``noise_level`` for Flow-SDE's ``a``, ``noise_std_bounds`` for
Flow-Noise's bounds); ``policy.exploration_anneal_updates`` is the update (iteration) at which they
arrive. Update ``i`` (counting from 0) samples its rollout with the settings at fraction
``min(1, i / exploration_anneal_updates)`` of the way. The settings change only between iterations,
so a rollout and the update that recomputes its log-probabilities see the same chain distribution
(the importance ratio still starts at 1), and since the update counter lives in the checkpoint the
noise of an update is the same on any machine and after a resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vla_rl.config.structured import Check, not_negative, value_check
from vla_rl.training.checkpoint import load_checkpoint
from vla_rl.training.chunk_rl.config import RLPolicyConfig

ANNEALED_KEYS = ("noise_level", "noise_std_bounds")
"""The exploration settings that can move during a run (the fields of ``AnnealedExploration``)."""


def bounds_check(key: str) -> Check[Any]:
    """``key`` holds Flow-Noise's std bounds ``[min, max]``, or None (not set)."""
    return value_check(
        key, lambda b: len(b) == 2 and 0.0 < b[0] < b[1], "must be [min, max] with 0 < min < max"
    )


ANNEAL_CHECKS: list[Check[RLPolicyConfig]] = [
    *not_negative("exploration_final.noise_level", "exploration_anneal_updates"),
    bounds_check("exploration_final.noise_std_bounds"),
    Check(
        "exploration_anneal_updates",
        lambda p: p.exploration_anneal_updates > 0 or not p.exploration_final.given(),
        "must be positive when exploration_final is set",
    ),
    *(
        Check(
            f"exploration_final.{key}",
            lambda p, key=key: (
                getattr(p.exploration_final, key) is None
                or len(_as_list(getattr(p.exploration_final, key)))
                == len(_as_list(getattr(p.exploration, key) or []))
            ),
            f"needs its start in policy.exploration.{key}, as many numbers as it",
        )
        for key in ANNEALED_KEYS
    ),
]
"""The checks of ``policy.exploration_final`` against its start in ``policy.exploration`` and
``policy.exploration_anneal_updates`` (keys below ``policy``)."""


def annealed_exploration(
    start: Mapping[str, Any], final: Mapping[str, Any], anneal_updates: int, update: int
) -> dict[str, Any]:
    """The settings of ``final`` at ``update``: linear from their start (update 0) to their end at
    ``anneal_updates``, held there afterwards."""
    fraction = min(1.0, max(0.0, update / anneal_updates)) if anneal_updates > 0 else 1.0
    settings: dict[str, Any] = {}
    for key, end in final.items():
        values = [b + fraction * (e - b) for b, e in zip(_as_list(start[key]), _as_list(end), strict=True)]
        settings[key] = values if _is_sequence(end) else values[0]
    return settings


def exploration_at(policy: RLPolicyConfig, update: int) -> dict[str, Any]:
    """The annealed settings of ``policy.exploration_final`` at ``update`` (empty when nothing is
    annealed)."""
    final = policy.exploration_final.given()
    if not final:
        return {}
    return annealed_exploration(policy.exploration.given(), final, policy.exploration_anneal_updates, update)


def run_updates(policy: RLPolicyConfig, run_dir: str | Path) -> int:
    """The update count of a run's last checkpoint when its exploration was annealed (0 when it was
    not: then nothing depends on it), for loading that checkpoint with its noise."""
    if not policy.exploration_final.given():
        return 0
    return int(load_checkpoint(run_dir).trainer_state["iteration"])


def exploration_metrics(settings: Mapping[str, Any]) -> dict[str, float]:
    """``exploration/noise_level``, ``exploration/noise_std_bounds_min`` and ``_max`` for logging."""
    metrics = {}
    for key, value in settings.items():
        if _is_sequence(value):
            low, high = value
            metrics[f"exploration/{key}_min"], metrics[f"exploration/{key}_max"] = float(low), float(high)
        else:
            metrics[f"exploration/{key}"] = float(value)
    return metrics


def _is_sequence(value: Any) -> bool:
    return hasattr(value, "__len__") and not isinstance(value, str)


def _as_list(value: Any) -> list[float]:
    return [float(item) for item in value] if _is_sequence(value) else [float(value)]
