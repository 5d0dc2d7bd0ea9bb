"""A flow policy's exploration noise moved linearly over the run's wall clock.

``policy.exploration`` sets where the noise starts; ``policy.exploration_final`` names the numeric
settings to move and where they end (``noise_level`` for Flow-SDE's ``a``, ``noise_std_bounds`` for
Flow-Noise's bounds); ``policy.exploration_anneal_minutes`` is the minute of the run's clock (the one
``max_minutes`` and ``actor_lr_decay_minutes`` count) at which they arrive. The settings change only
between iterations, so a rollout and the update that recomputes its log-probabilities see the same
chain distribution (the importance ratio still starts at 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vla_rl.training.checkpoint import load_checkpoint
from vla_rl.training.chunk_rl.config import RLPolicyConfig

ANNEALED_KEYS = ("noise_level", "noise_std_bounds")
"""The exploration settings that can move during a run."""


def check_exploration_anneal(start: Mapping[str, Any], final: Mapping[str, Any], minutes: float) -> None:
    """ValueError unless ``final`` names only annealable settings, each set in ``start`` too and of
    the same shape there, and ``minutes`` is positive whenever ``final`` names any."""
    if not final:
        return
    unknown = sorted(set(final) - set(ANNEALED_KEYS))
    if unknown:
        raise ValueError(f"exploration_final: {unknown} cannot be annealed; allowed: {list(ANNEALED_KEYS)}")
    if minutes <= 0:
        raise ValueError("exploration_final needs exploration_anneal_minutes > 0")
    for key, end in final.items():
        if key not in start:
            raise ValueError(f"exploration_final.{key} needs its starting value in policy.exploration")
        begin = start[key]
        if _as_list(begin) is None or _as_list(end) is None or len(_as_list(begin)) != len(_as_list(end)):
            raise ValueError(f"exploration_final.{key}: {end!r} does not match its start {begin!r}")
    bounds = final.get("noise_std_bounds")
    if bounds is not None and not 0.0 < bounds[0] < bounds[1]:
        raise ValueError(f"exploration_final.noise_std_bounds: need 0 < min < max, got {list(bounds)}")
    if final.get("noise_level", 0.0) < 0.0:
        raise ValueError(f"exploration_final.noise_level must be >= 0, got {final['noise_level']}")


def annealed_exploration(
    start: Mapping[str, Any], final: Mapping[str, Any], minutes: float, elapsed_minutes: float
) -> dict[str, Any]:
    """The settings of ``final`` at ``elapsed_minutes``: linear from their start to their end at
    ``minutes``, held there afterwards."""
    fraction = min(1.0, max(0.0, elapsed_minutes / minutes)) if minutes > 0 else 1.0
    settings: dict[str, Any] = {}
    for key, end in final.items():
        values = [b + fraction * (e - b) for b, e in zip(_as_list(start[key]), _as_list(end), strict=True)]
        settings[key] = values if _is_sequence(end) else values[0]
    return settings


def exploration_at(policy: RLPolicyConfig, elapsed_minutes: float) -> dict[str, Any]:
    """The annealed settings of ``policy.exploration_final`` at ``elapsed_minutes`` (empty when
    nothing is annealed)."""
    if not policy.exploration_final:
        return {}
    return annealed_exploration(
        policy.exploration, policy.exploration_final, policy.exploration_anneal_minutes, elapsed_minutes
    )


def run_minutes(policy: RLPolicyConfig, run_dir: str | Path) -> float:
    """Minutes of a run's clock at its last checkpoint when its exploration was annealed (0 when it
    was not: then nothing depends on them), for loading that checkpoint with its noise."""
    if not policy.exploration_final:
        return 0.0
    return float(load_checkpoint(run_dir).trainer_state.get("elapsed_s", 0.0)) / 60.0


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


def _as_list(value: Any) -> list[float] | None:
    """A number or a sequence of numbers as a list of floats; None for anything else."""
    items = list(value) if _is_sequence(value) else [value]
    try:
        return [float(item) for item in items]
    except (TypeError, ValueError):
        return None
