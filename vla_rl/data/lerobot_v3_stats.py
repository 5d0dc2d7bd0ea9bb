"""Feature statistics of a LeRobot v3.0 dataset: per episode with quantiles, and pooled over episodes.

Each feature gets min, max, mean, std (population), count (frames) and the ``DATASET_QUANTILES``
(``q01`` ... ``q99``) per dimension; images per channel in [0, 1], shaped [C, 1, 1]. Episode quantiles
are exact order statistics (the inverse of the empirical CDF: the ``ceil(q * n)``-th smallest value),
which LeRobot 0.4 estimates with a 5000-bin histogram (within one bin width of these). The dataset's
stats pool the episodes': min of mins, max of maxes, count-weighted mean, pooled variance, and, as
LeRobot aggregates them, count-weighted means of the episodes' quantiles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vla_rl.data.lerobot_v3_layout import DATASET_QUANTILES, STATS_PREFIX, stats_column
from vla_rl.data.stats import feature_stats, image_stats, quantile_key

Stats = dict[str, dict[str, np.ndarray]]


def vector_stats(values: np.ndarray, quantiles: Sequence[float] = DATASET_QUANTILES) -> dict[str, np.ndarray]:
    """``feature_stats`` of a [T, ...] array plus its per-dimension quantiles (shape [1] for a [T] column)."""
    data = np.asarray(values, dtype=np.float64)
    stats = feature_stats(data)
    for q in quantiles:
        value = np.quantile(data, q, axis=0, method="inverted_cdf")
        stats[quantile_key(q)] = np.atleast_1d(value)
    return stats


def frame_stats(frames: np.ndarray, quantiles: Sequence[float] = DATASET_QUANTILES) -> dict[str, np.ndarray]:
    """``image_stats`` of uint8 frames [T, H, W, C] plus per-channel quantiles of the pixels, in [0, 1]."""
    stats = image_stats(frames)
    channels = frames.shape[-1]
    pixels = np.asarray(frames).reshape(-1, channels)
    cumulative = np.stack([np.cumsum(np.bincount(pixels[:, c], minlength=256)) for c in range(channels)])
    for q in quantiles:
        # the smallest grey level whose cumulative count reaches q * n: the ceil(q * n)-th smallest pixel
        levels = np.argmax(cumulative >= q * len(pixels), axis=1)
        stats[quantile_key(q)] = (levels / 255.0).reshape(channels, 1, 1)
    return stats


def aggregate_stats(episodes: Sequence[Stats]) -> Stats:
    """The dataset's stats from its episodes' (features missing from some episodes pool the others)."""
    features = sorted({feature for stats in episodes for feature in stats})
    return {feature: _pool([s[feature] for s in episodes if feature in s]) for feature in features}


def _pool(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    counts = np.array([float(part["count"][0]) for part in parts])
    total = counts.sum()
    means = np.stack([part["mean"] for part in parts])
    weights = counts.reshape(-1, *([1] * (means.ndim - 1))) / total
    mean = (weights * means).sum(axis=0)
    second_moment = (weights * (np.stack([part["std"] for part in parts]) ** 2 + means**2)).sum(axis=0)
    pooled = {
        "min": np.min(np.stack([part["min"] for part in parts]), axis=0),
        "max": np.max(np.stack([part["max"] for part in parts]), axis=0),
        "mean": mean,
        "std": np.sqrt(np.maximum(second_moment - mean**2, 0.0)),
        "count": np.array([int(total)], dtype=np.int64),
    }
    quantile_names = [name for name in parts[0] if name.startswith("q") and all(name in p for p in parts)]
    for name in quantile_names:
        pooled[name] = (weights * np.stack([part[name] for part in parts])).sum(axis=0)
    return pooled


def stats_to_columns(stats: Stats) -> dict[str, list]:
    """One episode's stats as ``stats/<feature>/<stat>`` cells of the episodes table (nested lists)."""
    return {
        stats_column(feature, name): np.asarray(value).tolist()
        for feature, values in stats.items()
        for name, value in values.items()
    }


def stats_from_columns(row: dict[str, object]) -> Stats:
    """Inverse of ``stats_to_columns`` for one episodes-table row (other columns are ignored)."""
    stats: Stats = {}
    for column, value in row.items():
        if not column.startswith(STATS_PREFIX) or value is None:
            continue
        feature, name = column[len(STATS_PREFIX) :].rsplit("/", 1)
        dtype = np.int64 if name == "count" else np.float64
        stats.setdefault(feature, {})[name] = np.asarray(value, dtype=dtype)
    return stats
