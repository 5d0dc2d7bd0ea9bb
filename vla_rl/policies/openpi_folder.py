"""An openpi PyTorch export of pi0 / pi0.5, read onto the same description as a LeRobot folder.

openpi's ``examples/convert_jax_model_to_pytorch.py`` writes::

    config.json                          action_dim, action_horizon, paligemma_variant,
                                         action_expert_variant, precision (nothing else)
    model.safetensors                    openpi's ``PI0Pytorch`` state dict (``paligemma_with_expert...``,
                                         ``action_in_proj``, ...; no ``model.`` prefix)
    assets/<asset_id>/norm_stats.json    openpi's ``normalize.save``: ``norm_stats.state`` / ``.actions``
                                         with ``mean``, ``std``, ``q01``, ``q99``

The export does not say pi0 or pi0.5; the weights do: pi0 has ``state_proj`` and
``action_time_mlp_in/out``, pi0.5 has ``time_mlp_in/out`` (and adaRMS expert norms). What openpi's
model config and transforms fix is filled in here (``read_openpi_export``): pi0 normalises state and
actions with mean / std, pi0.5 with the 1 % / 99 % quantiles (openpi's ``use_quantile_norm``), with
openpi's epsilon 1e-6; prompts of 48 (pi0) / 200 (pi0.5) tokens, pi0.5's with the discretised state;
images resized with padding to 224 x 224; 10 denoising steps; the model's three camera slots
``base_0_rgb``, ``left_wrist_0_rgb``, ``right_wrist_0_rgb``. The result is a ``LeRobotFolder`` with
``convention="openpi"``, so pi0 / pi0.5 load through the one path LeRobot folders take
(``lerobot_pi0_io``), and the places where openpi's preprocessing differs from LeRobot's branch on that
convention (``lerobot_folder.normalize``, ``lerobot_preprocessing``).

What is robot-specific in openpi (its ``LiberoInputs``, ``DroidInputs``, ``AlohaInputs`` and their
outputs) lives in openpi's training config, not in the export: here the env's cameras meet the three
slots through ``policy.camera_map`` (a slot mapped to null is left out, as openpi masks a padding
image), the state is the env's (``policy.state_map`` to reorder) and the actions are the first
``action_dim`` of the statistics' width (``policy.action_map``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from vla_rl.config.structured import ConfigError
from vla_rl.policies.lerobot_folder import STATS_NEEDED, Feature, LeRobotFolder

CONFIG_KEYS = ("action_dim", "action_horizon", "paligemma_variant", "action_expert_variant")
"""The keys of an openpi export's config.json (with ``precision``)."""
NORM_STATS_FILE = "norm_stats.json"
ASSETS_DIR = "assets"
ASSET_ID_KEY = "policy.openpi_asset_id"
"""The setting that names the asset id when ``assets/`` holds several."""
IMAGE_KEYS = ("base_0_rgb", "left_wrist_0_rgb", "right_wrist_0_rgb")
"""openpi's model camera slots, in the order its prefix embeds them."""
IMAGE_SIDE = 224
"""openpi resizes (with padding) every image to 224 x 224 (``ResizeImages(224, 224)``)."""
MAX_TOKEN_LEN = {"pi0": 48, "pi05": 200}
"""``Pi0Config.max_token_len``'s defaults."""
NORMALIZATION = {"pi0": "MEAN_STD", "pi05": "QUANTILES"}
"""openpi normalises pi0 with mean / std and every other model type with quantiles."""
EPS = 1e-6
"""openpi's ``Normalize`` / ``Unnormalize`` epsilon."""
FLOW_SETTINGS = {
    "num_inference_steps": 10,
    "time_sampling_beta_alpha": 1.5,
    "time_sampling_beta_beta": 1.0,
    "time_sampling_scale": 0.999,
    "time_sampling_offset": 0.001,
    "min_period": 4e-3,
    "max_period": 4.0,
}
"""``PI0Pytorch``'s fixed choices: ``sample_actions``' default steps, ``sample_time``'s Beta(1.5, 1)
scaled to [0.001, 1], the sinusoidal time embedding's periods."""
PI0_KEY, PI05_KEY = "state_proj.weight", "time_mlp_in.weight"
"""The weights that tell pi0 (a state token) from pi0.5 (adaRMS time conditioning)."""
STATS_KEYS = {"observation.state": "state", "action": "actions"}
"""Our feature key -> openpi's norm-stats key."""


def is_openpi_export(path: str | Path) -> bool:
    """Whether ``path`` looks like an openpi PyTorch export (its config.json has openpi's keys and no
    LeRobot ``type``)."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text())
    except json.JSONDecodeError:
        return False
    return isinstance(data, dict) and "type" not in data and all(key in data for key in CONFIG_KEYS)


def openpi_policy_type(weight_names: set[str], path: Path) -> str:
    """``pi0`` or ``pi05``, from the weights; ``ConfigError`` when they are neither's."""
    if PI05_KEY in weight_names and PI0_KEY not in weight_names:
        return "pi05"
    if PI0_KEY in weight_names and PI05_KEY not in weight_names:
        return "pi0"
    raise ConfigError(
        f"policy.init_from: {path}/model.safetensors is not an openpi pi0 or pi0.5 export: it has "
        f"{'both' if PI0_KEY in weight_names else 'neither'} of {PI0_KEY!r} (pi0) and {PI05_KEY!r} (pi0.5)"
    )


def asset_ids(path: Path) -> list[str]:
    """The asset ids of the export: each folder under ``assets/`` holding a ``norm_stats.json``,
    relative to ``assets/`` (openpi's ids nest, e.g. ``physical-intelligence/libero``)."""
    assets = path / ASSETS_DIR
    if not assets.is_dir():
        return []
    return sorted(file.parent.relative_to(assets).as_posix() for file in assets.rglob(NORM_STATS_FILE))


def choose_asset_id(path: Path, asset_id: str | None) -> str:
    """The asset id to read: ``asset_id`` when given, else the only one there."""
    found = asset_ids(path)
    if not found:
        raise ConfigError(
            f"policy.init_from: the openpi export {path} has no normalisation statistics "
            f"({ASSETS_DIR}/<asset_id>/{NORM_STATS_FILE}); openpi's conversion copies them from the "
            "checkpoint's assets"
        )
    if asset_id is None:
        if len(found) > 1:
            raise ConfigError(
                f"config key '{ASSET_ID_KEY}': the openpi export {path} has statistics for several asset "
                f"ids {found}; name the one to use"
            )
        return found[0]
    if asset_id not in found:
        raise ConfigError(
            f"config key '{ASSET_ID_KEY}': {asset_id!r} is not in {path}/{ASSETS_DIR} ({found})"
        )
    return asset_id


def read_norm_stats(file: Path, mode: str) -> dict[str, dict[str, np.ndarray]]:
    """openpi's norm_stats.json -> our feature key -> statistic -> float64 values; ``ConfigError`` for
    a missing entry or a statistic ``mode`` needs."""
    try:
        raw = json.loads(file.read_text())["norm_stats"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise ConfigError(f"policy.init_from: {file} is not openpi's norm_stats.json format") from None
    stats: dict[str, dict[str, np.ndarray]] = {}
    for key, name in STATS_KEYS.items():
        entry = raw.get(name)
        if not isinstance(entry, dict):
            raise ConfigError(f"policy.init_from: {file} has no statistics for {name!r}")
        missing = [stat for stat in STATS_NEEDED[mode] if entry.get(stat) is None]
        if missing:
            raise ConfigError(f"policy.init_from: {file} normalises {name!r} with {mode} but lacks {missing}")
        stats[key] = {
            stat: np.asarray(values, dtype=np.float64) for stat, values in entry.items() if values is not None
        }
    return stats


def norm_stats_file(asset_id: str) -> str:
    """The statistics file of ``asset_id``, relative to the export."""
    return f"{ASSETS_DIR}/{asset_id}/{NORM_STATS_FILE}"


def openpi_files(folder: LeRobotFolder) -> dict[str, Any]:
    """The export's config.json and the statistics file it was read with (relative path -> JSON), kept
    with an import (``LeRobotPreprocessing.folder_files``) so ``vla-rl export --format openpi`` writes
    them back."""
    chosen = norm_stats_file(folder.config["asset_id"])
    return {name: json.loads((folder.path / name).read_text()) for name in ("config.json", chosen)}


def read_openpi_export(
    path: str | Path, weight_names: set[str], asset_id: str | None = None
) -> LeRobotFolder:
    """The export at ``path`` (whose ``model.safetensors`` holds ``weight_names``) as a ``LeRobotFolder``
    with openpi's conventions; ``asset_id`` picks its statistics (required when there are several)."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    policy_type = openpi_policy_type(weight_names, path)
    mode = NORMALIZATION[policy_type]
    chosen = choose_asset_id(path, asset_id)
    stats = read_norm_stats(path / ASSETS_DIR / chosen / NORM_STATS_FILE, mode)
    model_width = int(config["action_dim"])
    state_dim, action_dim = (len(stats[key][STATS_NEEDED[mode][0]]) for key in STATS_KEYS)
    if max(state_dim, action_dim) > model_width:
        raise ConfigError(
            f"policy.init_from: {path}: statistics of width {max(state_dim, action_dim)} for a model of "
            f"action_dim {model_width}"
        )
    described: dict[str, Any] = {
        "source": "openpi",
        "openpi_config": config,
        "asset_id": chosen,
        "chunk_size": int(config["action_horizon"]),
        "max_action_dim": model_width,
        "max_state_dim": model_width,
        "image_resolution": [IMAGE_SIDE, IMAGE_SIDE],
        "tokenizer_max_length": MAX_TOKEN_LEN[policy_type],
        **FLOW_SETTINGS,
    }
    image = Feature(type="VISUAL", shape=(3, IMAGE_SIDE, IMAGE_SIDE))
    inputs = {f"observation.images.{key}": image for key in IMAGE_KEYS}
    inputs["observation.state"] = Feature(type="STATE", shape=(state_dim,))
    return LeRobotFolder(
        path=path,
        policy_type=policy_type,
        config=described,
        input_features=inputs,
        output_features={"action": Feature(type="ACTION", shape=(action_dim,))},
        normalization_mapping={"VISUAL": "IDENTITY", "STATE": mode, "ACTION": mode},
        stats=stats,
        eps=EPS,
        convention="openpi",
    )
