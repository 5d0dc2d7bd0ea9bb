"""A LeRobot 0.4 policy folder, read: its config, its features and its normalisation statistics.

LeRobot's ``save_pretrained`` writes a policy as a folder::

    config.json                                  the policy config ("type": "pi0", "pi05", "smolvla", ...)
    model.safetensors                            the weights
    policy_preprocessor.json                     the input pipeline; its "normalizer_processor" step names
    policy_preprocessor_step_<i>_normalizer_processor.safetensors   the statistics ("<key>.<stat>")
    policy_postprocessor.json                    the output pipeline ("unnormalizer_processor" for actions)
    policy_postprocessor_step_<i>_unnormalizer_processor.safetensors

This module reads that folder (``read_lerobot_folder``) and applies LeRobot's normalisation maths to a
tensor (``normalize``), so the policy families that load such folders preprocess exactly as the
reference does. Anything missing is a ``ConfigError`` naming the file or key, raised before a model is
built.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.numpy import load_file

from vla_rl.config.structured import ConfigError

LEROBOT_POLICY_TYPES = ("pi0", "pi05", "smolvla")
"""The LeRobot policy types this toolkit loads (config.json's "type")."""
PREPROCESSOR_FILE = "policy_preprocessor.json"
POSTPROCESSOR_FILE = "policy_postprocessor.json"
NORMALIZER_STEP = "normalizer_processor"
UNNORMALIZER_STEP = "unnormalizer_processor"
NORMALIZATION_MODES = ("IDENTITY", "MEAN_STD", "MIN_MAX", "QUANTILES", "QUANTILE10")
STATS_NEEDED = {
    "MEAN_STD": ("mean", "std"),
    "MIN_MAX": ("min", "max"),
    "QUANTILES": ("q01", "q99"),
    "QUANTILE10": ("q10", "q90"),
}
"""The statistics each normalisation mode reads (``IDENTITY`` reads none)."""


@dataclass(frozen=True)
class Feature:
    """One input or output of a LeRobot policy."""

    type: str
    """LeRobot's feature type: ``VISUAL``, ``STATE``, ``ENV``, ``ACTION`` or ``LANGUAGE``."""
    shape: tuple[int, ...]
    """Shape of one sample (channels first for images)."""


@dataclass
class LeRobotFolder:
    """What a LeRobot policy folder says about its policy, read once."""

    path: Path
    """The folder."""
    policy_type: str
    """config.json's ``type``: one of ``LEROBOT_POLICY_TYPES``."""
    config: dict[str, Any]
    """config.json as LeRobot saved it."""
    input_features: dict[str, Feature]
    """Observation key (``observation.state``, ``observation.images.<camera>``) -> feature."""
    output_features: dict[str, Feature]
    """Output key (``action``) -> feature."""
    normalization_mapping: dict[str, str]
    """Feature type -> normalisation mode, as the preprocessor's normaliser applies it."""
    stats: dict[str, dict[str, np.ndarray]]
    """Feature key -> statistic name (``mean``, ``std``, ``min``, ``max``, ``q01``, ``q99``...) -> values."""
    eps: float = 1e-8
    """The normaliser's epsilon (LeRobot: added to ``std``, replaces a zero range; openpi: added to
    ``std`` and to ``q99 - q01`` both ways)."""
    convention: str = "lerobot"
    """Whose normalisation maths and preprocessing apply: ``lerobot`` or ``openpi`` (an openpi PyTorch
    export mapped onto this description by ``vla_rl.policies.openpi_folder``)."""

    def feature_type(self, key: str) -> str:
        """The feature type of an input or output key; ``ConfigError`` for a key the folder lacks."""
        feature = self.input_features.get(key) or self.output_features.get(key)
        if feature is None:
            known = sorted(self.input_features) + sorted(self.output_features)
            raise ConfigError(f"{self.path}: no feature {key!r} (the policy has {known})")
        return feature.type

    def image_keys(self) -> list[str]:
        """The camera inputs in config order (``observation.images.<camera>``)."""
        return [key for key, feature in self.input_features.items() if feature.type == "VISUAL"]


def is_lerobot_folder(path: str | Path) -> bool:
    """Whether ``path`` looks like a LeRobot policy folder (a config.json with a ``type`` and the
    preprocessor pipeline next to it)."""
    path = Path(path)
    config = path / "config.json"
    if not (config.is_file() and (path / PREPROCESSOR_FILE).is_file()):
        return False
    try:
        return "type" in json.loads(config.read_text())
    except json.JSONDecodeError:
        return False


def read_lerobot_folder(path: str | Path) -> LeRobotFolder:
    """Read a LeRobot policy folder; ``ConfigError`` for an unknown type, a missing file or missing
    statistics."""
    path = Path(path)
    config = _read_json(path / "config.json")
    policy_type = config.get("type")
    if policy_type not in LEROBOT_POLICY_TYPES:
        raise ConfigError(
            f"policy.init_from: {path} is a LeRobot {policy_type!r} policy; the LeRobot types that load "
            f"are {list(LEROBOT_POLICY_TYPES)}"
        )
    if not (path / "model.safetensors").is_file():
        raise ConfigError(f"policy.init_from: {path} has no model.safetensors")
    step = _normalizer_step(path)
    step_config = step.get("config", {})
    mapping = dict(step_config.get("norm_map") or config.get("normalization_mapping") or {})
    for feature_type, mode in mapping.items():
        if mode not in NORMALIZATION_MODES:
            raise ConfigError(f"{path}: unknown normalisation mode {mode!r} for {feature_type}")
    folder = LeRobotFolder(
        path=path,
        policy_type=policy_type,
        config=config,
        input_features=_features(config.get("input_features", {})),
        output_features=_features(config.get("output_features", {})),
        normalization_mapping=mapping,
        stats=_stats(path, step),
        eps=float(step_config.get("eps", 1e-8)),
    )
    _check_stats(folder)
    return folder


def normalize(x: torch.Tensor, key: str, folder: LeRobotFolder, *, inverse: bool = False) -> torch.Tensor:
    """``x`` (a batch of feature ``key``) normalised as LeRobot's normaliser does (or openpi's
    ``Normalize`` for ``folder.convention == "openpi"``), or unnormalised with ``inverse``. Statistics
    broadcast over the leading dimensions; the result has ``x``'s dtype."""
    mode = folder.normalization_mapping.get(folder.feature_type(key), "IDENTITY")
    if mode == "IDENTITY" or key not in folder.stats:
        return x
    if folder.convention == "openpi":
        return _openpi_normalize(x, mode, folder.stats[key], folder.eps, inverse)
    low_name, high_name = STATS_NEEDED[mode]
    stats = folder.stats[key]
    low = torch.as_tensor(stats[low_name], dtype=x.dtype, device=x.device)
    high = torch.as_tensor(stats[high_name], dtype=x.dtype, device=x.device)
    if mode == "MEAN_STD":
        mean, std = low, high
        return x * std + mean if inverse else (x - mean) / (std + folder.eps)
    span = high - low
    span = torch.where(span == 0, torch.full_like(span, folder.eps), span)
    if not inverse:
        return 2 * (x - low) / span - 1
    # LeRobot's own order of operations for each inverse, so the results agree to the last bit.
    return (x + 1) / 2 * span + low if mode == "MIN_MAX" else (x + 1) * span / 2 + low


def _openpi_normalize(
    x: torch.Tensor, mode: str, stats: dict[str, np.ndarray], eps: float, inverse: bool
) -> torch.Tensor:
    """openpi's ``Normalize`` / ``Unnormalize`` maths: ``eps`` is added to ``std`` and to the quantile
    range in both directions; computed in float64 (openpi's statistics are float64 arrays), the result
    cast back to ``x``'s dtype. Statistics wider than ``x`` are cut to its width."""
    width = x.shape[-1]
    low_name, high_name = STATS_NEEDED[mode]

    def stat(name: str) -> torch.Tensor:
        return torch.as_tensor(np.asarray(stats[name])[..., :width], dtype=torch.float64, device=x.device)

    low, high, values = stat(low_name), stat(high_name), x.double()
    if mode == "MEAN_STD":
        scale = high + eps
        out = values * scale + low if inverse else (values - low) / scale
    else:
        span = high - low + eps
        out = (values + 1.0) / 2.0 * span + low if inverse else (values - low) / span * 2.0 - 1.0
    return out.to(x.dtype)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"policy.init_from: {path} is missing")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"policy.init_from: {path} is not valid JSON ({error})") from None


def _normalizer_step(path: Path) -> dict[str, Any]:
    """The preprocessor's normaliser step (its config and state file)."""
    pipeline = _read_json(path / PREPROCESSOR_FILE)
    for step in pipeline.get("steps", []):
        if step.get("registry_name") == NORMALIZER_STEP:
            return step
    raise ConfigError(
        f"policy.init_from: {path / PREPROCESSOR_FILE} has no {NORMALIZER_STEP} step, so the folder "
        "carries no normalisation statistics"
    )


def _features(raw: dict[str, Any]) -> dict[str, Feature]:
    return {key: Feature(type=value["type"], shape=tuple(value["shape"])) for key, value in raw.items()}


def _stats(path: Path, step: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """The normaliser's statistics ("<key>.<stat>" tensors) as key -> stat -> array."""
    state_file = step.get("state_file")
    if state_file is None or not (path / state_file).is_file():
        raise ConfigError(
            f"policy.init_from: {path} lacks the normalisation statistics file of its "
            f"{NORMALIZER_STEP} step ({state_file or 'no state_file named'})"
        )
    stats: dict[str, dict[str, np.ndarray]] = {}
    for flat_key, values in load_file(str(path / state_file)).items():
        key, stat = flat_key.rsplit(".", 1)
        stats.setdefault(key, {})[stat] = values
    return stats


def _check_stats(folder: LeRobotFolder) -> None:
    """Every state and action feature whose mode needs statistics has them."""
    features = {**folder.input_features, **folder.output_features}
    for key, feature in features.items():
        mode = folder.normalization_mapping.get(feature.type, "IDENTITY")
        if mode == "IDENTITY" or feature.type == "VISUAL":
            continue
        missing = [name for name in STATS_NEEDED[mode] if name not in folder.stats.get(key, {})]
        if missing:
            raise ConfigError(
                f"policy.init_from: {folder.path} normalises {key!r} with {mode} but its statistics lack "
                f"{missing}"
            )
