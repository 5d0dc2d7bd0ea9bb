"""Reading a LeRobot policy folder: the files LeRobot 0.4's save_pretrained writes (written here by
hand in its layout), the normalisation maths against numbers worked out by hand, and the errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from vla_rl.config import ConfigError
from vla_rl.policies.lerobot_folder import is_lerobot_folder, normalize, read_lerobot_folder

FEATURES = {
    "observation.state": {"type": "STATE", "shape": [2]},
    "observation.images.top": {"type": "VISUAL", "shape": [3, 8, 8]},
}
ACTION = {"action": {"type": "ACTION", "shape": [2]}}
STATS = {
    "observation.state.mean": np.array([1.0, -2.0], np.float32),
    "observation.state.std": np.array([2.0, 0.5], np.float32),
    "action.min": np.array([0.0, -1.0], np.float32),
    "action.max": np.array([4.0, -1.0], np.float32),
    "action.q01": np.array([-1.0, 0.0], np.float32),
    "action.q99": np.array([1.0, 10.0], np.float32),
}


def write_folder(
    path: Path,
    policy_type: str = "pi0",
    norm_map: dict[str, str] | None = None,
    stats: dict[str, np.ndarray] | None = None,
) -> Path:
    """A policy folder in LeRobot 0.4's layout (weights empty: only the reading is tested here)."""
    norm_map = norm_map or {"VISUAL": "IDENTITY", "STATE": "MEAN_STD", "ACTION": "MIN_MAX"}
    path.mkdir(parents=True, exist_ok=True)
    config = {"type": policy_type, "input_features": FEATURES, "output_features": ACTION}
    config["normalization_mapping"] = norm_map
    (path / "config.json").write_text(json.dumps(config))
    save_file({"w": np.zeros(1, np.float32)}, str(path / "model.safetensors"))
    state_file = "policy_preprocessor_step_3_normalizer_processor.safetensors"
    step = {
        "registry_name": "normalizer_processor",
        "config": {"eps": 1e-8, "features": {**FEATURES, **ACTION}, "norm_map": norm_map},
        "state_file": state_file,
    }
    steps = [{"registry_name": "to_batch_processor", "config": {}}, step]
    (path / "policy_preprocessor.json").write_text(
        json.dumps({"name": "policy_preprocessor", "steps": steps})
    )
    save_file(STATS if stats is None else stats, str(path / state_file))
    return path


def test_reads_type_features_modes_and_stats(tmp_path: Path) -> None:
    folder = read_lerobot_folder(write_folder(tmp_path / "p"))
    assert folder.policy_type == "pi0"
    assert folder.image_keys() == ["observation.images.top"]
    assert folder.input_features["observation.images.top"].shape == (3, 8, 8)
    assert folder.normalization_mapping["STATE"] == "MEAN_STD"
    np.testing.assert_array_equal(folder.stats["action"]["q99"], [1.0, 10.0])
    assert is_lerobot_folder(tmp_path / "p")
    assert not is_lerobot_folder(tmp_path)


def test_mean_std_by_hand(tmp_path: Path) -> None:
    folder = read_lerobot_folder(write_folder(tmp_path / "p"))
    state = torch.tensor([[3.0, -1.0]])
    # (3 - 1) / 2 = 1; (-1 + 2) / 0.5 = 2 (the 1e-8 epsilon is below float32's resolution here)
    normalised = normalize(state, "observation.state", folder)
    torch.testing.assert_close(normalised, torch.tensor([[1.0, 2.0]]))
    torch.testing.assert_close(normalize(normalised, "observation.state", folder, inverse=True), state)


def test_min_max_by_hand_with_a_constant_dimension(tmp_path: Path) -> None:
    folder = read_lerobot_folder(write_folder(tmp_path / "p"))
    action = torch.tensor([[1.0, -1.0]])
    # dim 0: 2 * (1 - 0) / 4 - 1 = -0.5; dim 1 has min == max, so its span is eps: 2 * 0 / eps - 1 = -1
    normalised = normalize(action, "action", folder)
    torch.testing.assert_close(normalised, torch.tensor([[-0.5, -1.0]]))
    torch.testing.assert_close(normalize(normalised, "action", folder, inverse=True), action)


def test_quantiles_by_hand(tmp_path: Path) -> None:
    norm_map = {"VISUAL": "IDENTITY", "STATE": "IDENTITY", "ACTION": "QUANTILES"}
    folder = read_lerobot_folder(write_folder(tmp_path / "p", norm_map=norm_map))
    action = torch.tensor([[0.5, 2.5]])
    # dim 0: 2 * (0.5 + 1) / 2 - 1 = 0.5; dim 1: 2 * 2.5 / 10 - 1 = -0.5
    torch.testing.assert_close(normalize(action, "action", folder), torch.tensor([[0.5, -0.5]]))
    state = torch.tensor([[7.0, 8.0]])
    assert normalize(state, "observation.state", folder) is state  # IDENTITY


def test_unknown_type_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'act'.*\['pi0', 'pi05', 'smolvla'\]"):
        read_lerobot_folder(write_folder(tmp_path / "p", policy_type="act"))


def test_missing_stats_name_the_feature_and_statistic(tmp_path: Path) -> None:
    stats = {key: value for key, value in STATS.items() if key != "observation.state.std"}
    with pytest.raises(ConfigError, match=r"'observation.state' with MEAN_STD.*\['std'\]"):
        read_lerobot_folder(write_folder(tmp_path / "p", stats=stats))


def test_missing_statistics_file_and_missing_config_are_config_errors(tmp_path: Path) -> None:
    path = write_folder(tmp_path / "p")
    (path / "policy_preprocessor_step_3_normalizer_processor.safetensors").unlink()
    with pytest.raises(ConfigError, match="normalisation statistics file"):
        read_lerobot_folder(path)
    with pytest.raises(ConfigError, match="config.json is missing"):
        read_lerobot_folder(tmp_path / "empty")
