"""Feature statistics against numbers worked out by hand on a 3-frame example."""

from __future__ import annotations

import numpy as np
import pytest

from vla_rl.data.stats import (
    feature_stats,
    image_stats,
    quantile_key,
    stats_from_json,
    stats_to_json,
    summary_stats,
)

# Three frames of a 2-D action: dim 0 = 0, 2, 4; dim 1 = 1, 3, 8.
ACTIONS = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 8.0]], dtype=np.float32)


def test_feature_stats_by_hand() -> None:
    stats = feature_stats(ACTIONS)
    np.testing.assert_allclose(stats["min"], [0.0, 1.0])
    np.testing.assert_allclose(stats["max"], [4.0, 8.0])
    np.testing.assert_allclose(stats["mean"], [2.0, 4.0])
    # population std: sqrt((4 + 0 + 4) / 3), sqrt((9 + 1 + 16) / 3)
    np.testing.assert_allclose(stats["std"], [np.sqrt(8 / 3), np.sqrt(26 / 3)], rtol=1e-12)
    assert stats["count"].tolist() == [3]


def test_scalar_feature_keeps_one_value_per_stat() -> None:
    stats = feature_stats(np.array([0.5, 1.5, 1.0]))
    assert {name: value.shape for name, value in stats.items()} == {
        "min": (1,),
        "max": (1,),
        "mean": (1,),
        "std": (1,),
        "count": (1,),
    }
    np.testing.assert_allclose(stats["mean"], [1.0])
    np.testing.assert_allclose(stats["std"], [np.sqrt(1 / 6)], rtol=1e-12)


def test_summary_quantiles_by_hand() -> None:
    stats = summary_stats(ACTIONS)
    # linear interpolation at position (n - 1) q = 0.02 and 1.98:
    # dim 0: 0 + 0.02 * 2 = 0.04 and 2 + 0.98 * 2 = 3.96; dim 1: 1 + 0.02 * 2 = 1.04 and 3 + 0.98 * 5 = 7.9
    np.testing.assert_allclose(stats["q01"], [0.04, 1.04], rtol=1e-12)
    np.testing.assert_allclose(stats["q99"], [3.96, 7.9], rtol=1e-12)
    np.testing.assert_allclose(stats["mean"], [2.0, 4.0])
    assert set(stats) == {"min", "max", "mean", "std", "q01", "q99"}


def test_image_stats_by_hand() -> None:
    # 3 frames of 1x2 pixels; red is 0, 255, 0 | 255, 0, 255 -> mean 0.5, std 0.5; green all 51 -> 0.2, std 0.
    frames = np.zeros((3, 1, 2, 3), dtype=np.uint8)
    frames[:, 0, 0, 0] = [0, 255, 0]
    frames[:, 0, 1, 0] = [255, 0, 255]
    frames[..., 1] = 51
    frames[:, 0, :, 2] = [[0, 0], [0, 0], [0, 102]]
    stats = image_stats(frames)
    assert stats["mean"].shape == (3, 1, 1)
    np.testing.assert_allclose(stats["min"].ravel(), [0.0, 0.2, 0.0])
    np.testing.assert_allclose(stats["max"].ravel(), [1.0, 0.2, 0.4])
    # blue: five zeros and one 0.4 -> mean 0.4 / 6, var = (0.4^2 / 6) - (0.4 / 6)^2
    blue_mean = 0.4 / 6
    np.testing.assert_allclose(stats["mean"].ravel(), [0.5, 0.2, blue_mean], rtol=1e-12)
    blue_std = np.sqrt(0.16 / 6 - blue_mean**2)
    np.testing.assert_allclose(stats["std"].ravel(), [0.5, 0.0, blue_std], rtol=1e-9, atol=1e-12)
    assert stats["count"].tolist() == [3]


def test_image_stats_rejects_float_frames() -> None:
    with pytest.raises(ValueError, match="uint8"):
        image_stats(np.zeros((2, 4, 4, 3), dtype=np.float32))


@pytest.mark.parametrize(("q", "key"), [(0.01, "q01"), (0.99, "q99"), (0.5, "q50"), (0.001, "q0.1")])
def test_quantile_keys(q: float, key: str) -> None:
    assert quantile_key(q) == key


def test_stats_json_round_trip() -> None:
    stats = {"action": feature_stats(ACTIONS)}
    back = stats_from_json(stats_to_json(stats))
    for name, value in stats["action"].items():
        np.testing.assert_array_equal(back["action"][name], value)
    assert back["action"]["count"].dtype == np.int64
