"""Feature statistics as LeRobot stores them (per episode) and the quantiles VLA tokenizers need."""

from __future__ import annotations

from typing import Any

import numpy as np

STAT_NAMES = ("min", "max", "mean", "std")


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """min/max/mean/std over frames (axis 0) of a [T, ...] array, and ``count`` = [T].

    A [T] column gives stats of shape [1], as LeRobot keeps one value per scalar feature.
    ``std`` is the population standard deviation (ddof 0).
    """
    data = np.asarray(values, dtype=np.float64)
    if len(data) == 0:
        raise ValueError("cannot compute statistics of an empty feature")
    keepdims = data.ndim == 1
    stats = {
        "min": np.min(data, axis=0, keepdims=keepdims),
        "max": np.max(data, axis=0, keepdims=keepdims),
        "mean": np.mean(data, axis=0, keepdims=keepdims),
        "std": np.std(data, axis=0, keepdims=keepdims),
    }
    stats["count"] = np.array([len(data)], dtype=np.int64)
    return stats


def image_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel stats of uint8 frames [T, H, W, C] scaled to [0, 1], each shaped [C, 1, 1].

    Computed exactly from per-channel 256-bin histograms, which is much faster than float
    reductions over every pixel.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.dtype != np.uint8 or len(frames) == 0:
        raise ValueError(f"image stats need uint8 frames [T, H, W, C], got {frames.dtype} {frames.shape}")
    channels = frames.shape[-1]
    pixels = frames.reshape(-1, channels)
    levels = np.arange(256, dtype=np.float64) / 255.0
    columns: dict[str, list[float]] = {name: [] for name in STAT_NAMES}
    for channel in range(channels):
        counts = np.bincount(pixels[:, channel], minlength=256).astype(np.float64)
        present = np.flatnonzero(counts)
        mean = counts @ levels / counts.sum()
        columns["min"].append(levels[present[0]])
        columns["max"].append(levels[present[-1]])
        columns["mean"].append(mean)
        columns["std"].append(np.sqrt(counts @ (levels - mean) ** 2 / counts.sum()))
    stats = {name: np.asarray(values).reshape(channels, 1, 1) for name, values in columns.items()}
    stats["count"] = np.array([len(frames)], dtype=np.int64)
    return stats


def summary_stats(values: np.ndarray, quantiles: tuple[float, ...] = (0.01, 0.99)) -> dict[str, np.ndarray]:
    """min/max/mean/std and the given quantiles (keys ``q01``, ``q99`` ...) per dimension of [T, D].

    Quantiles use linear interpolation between order statistics (numpy's default).
    """
    data = np.asarray(values, dtype=np.float64)
    if data.ndim != 2 or len(data) == 0:
        raise ValueError(f"summary stats need a non-empty [T, D] array, got shape {data.shape}")
    stats = {name: value for name, value in feature_stats(data).items() if name != "count"}
    for q in quantiles:
        stats[quantile_key(q)] = np.quantile(data, q, axis=0)
    return stats


def quantile_key(q: float) -> str:
    """``0.01`` -> ``q01``, ``0.99`` -> ``q99``, ``0.5`` -> ``q50``, ``0.001`` -> ``q0.1``."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {q}")
    percent = round(100.0 * q, 6)
    return f"q{int(percent):02d}" if percent == int(percent) else f"q{percent:g}"


def stats_to_json(stats: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, Any]]:
    """Nested feature -> stat -> array dict as JSON-able nested lists."""
    return {
        feature: {name: np.asarray(v).tolist() for name, v in values.items()}
        for feature, values in stats.items()
    }


def stats_from_json(stats: dict[str, dict[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
    """Inverse of ``stats_to_json`` (counts as int64, everything else float64)."""
    return {
        feature: {
            name: np.asarray(v, dtype=np.int64 if name == "count" else np.float64)
            for name, v in values.items()
        }
        for feature, values in stats.items()
    }
