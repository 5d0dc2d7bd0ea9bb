"""A LeRobot ``pi0`` / ``pi05`` policy folder -> our ``Pi0Policy`` / ``Pi05Policy`` (what
``policy.init_from=DIR`` does with one).

The weights go to transformers' PI0 (``lerobot_pi0_model``), the preprocessing settings of the folder's
processors into ``Pi0PolicyConfig.lerobot`` (``lerobot_preprocessing``), and the tokenizer is the
folder's own when it carries one (tokenizer files in the folder or in its ``tokenizer/``), else the one
in ``tokenizer_dir``. LeRobot's pi0 processor names the hub's PaliGemma tokenizer instead of saving one,
so a user's folder usually needs ``tokenizer_dir``: a local copy of that tokenizer.

An openpi PyTorch export takes the same path: ``vla_rl.policies.openpi_folder`` reads it onto the same
``LeRobotFolder`` description (``convention="openpi"``). It never carries a tokenizer (openpi downloads
PaliGemma's sentencepiece model), so it always needs ``tokenizer_dir``, and its ``assets/`` may hold the
statistics of several robots (``asset_id``, ``policy.openpi_asset_id``).
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase

from vla_rl.config.structured import ConfigError
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.flow.lerobot_pi0_model import load_lerobot_pi0_model, weight_shapes
from vla_rl.policies.flow.lerobot_preprocessing import LeRobotPreprocessing
from vla_rl.policies.flow.pi0_config import Pi0PolicyConfig
from vla_rl.policies.lerobot_folder import (
    POSTPROCESSOR_FILE,
    PREPROCESSOR_FILE,
    LeRobotFolder,
    read_lerobot_folder,
)
from vla_rl.policies.openpi_folder import is_openpi_export, openpi_files, read_openpi_export
from vla_rl.policies.vla.text_tokenizer import TOKENIZER_DIR

FOLDER_JSON_FILES = ("config.json", PREPROCESSOR_FILE, POSTPROCESSOR_FILE)
"""The folder's JSON files kept with an import (``LeRobotPreprocessing.folder_files``) for export."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
"""A folder with any of these holds a tokenizer."""


def folder_json_files(folder: Path) -> dict[str, object]:
    """File name -> JSON of the folder's ``FOLDER_JSON_FILES`` that exist."""
    return {
        name: json.loads((folder / name).read_text())
        for name in FOLDER_JSON_FILES
        if (folder / name).is_file()
    }


def has_tokenizer(directory: Path) -> bool:
    return any((directory / name).is_file() for name in TOKENIZER_FILES)


def lerobot_tokenizer(
    folder: Path, tokenizer_dir: str | Path | None, convention: str = "lerobot"
) -> PreTrainedTokenizerBase:
    """The folder's tokenizer (in it or in its ``tokenizer/``), else ``tokenizer_dir``'s."""
    for candidate in (folder, folder / TOKENIZER_DIR):
        if has_tokenizer(candidate):
            return AutoTokenizer.from_pretrained(candidate, local_files_only=True)
    if tokenizer_dir is None:
        why = (
            "openpi's exports never do (openpi downloads PaliGemma's sentencepiece tokenizer, "
            "gs://big_vision/paligemma_tokenizer.model)"
            if convention == "openpi"
            else "LeRobot's processor names the hub's google/paligemma-3b-pt-224"
        )
        raise ConfigError(
            f"config key 'policy.tokenizer_dir': the {convention} folder {folder} carries no tokenizer "
            f"({why}); give a local copy of the PaliGemma tokenizer (google/paligemma-3b-pt-224's files)"
        )
    if not has_tokenizer(Path(tokenizer_dir)):
        raise ConfigError(f"config key 'policy.tokenizer_dir': {tokenizer_dir} holds no tokenizer files")
    return AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)


def read_pi_folder(directory: str | Path, asset_id: str | None = None) -> LeRobotFolder:
    """A LeRobot pi0 / pi05 folder, or an openpi export described the same way."""
    path = Path(directory)
    if is_openpi_export(path):
        if not (path / "model.safetensors").is_file():
            raise ConfigError(f"policy.init_from: the openpi export {path} has no model.safetensors")
        return read_openpi_export(path, set(weight_shapes(path / "model.safetensors")), asset_id)
    return read_lerobot_folder(path)


def checked_delta_mask(mask: list[bool], prep: LeRobotPreprocessing) -> list[bool] | None:
    """``policy.openpi_delta_action_mask`` as booleans, no longer than the checkpoint's action and
    state widths (``ConfigError`` otherwise); None when it marks nothing."""
    key = "config key 'policy.openpi_delta_action_mask'"
    if not all(isinstance(value, bool) for value in mask):
        raise ConfigError(f"{key}: {list(mask)} must be true / false values")
    if len(mask) > min(prep.action_dim, prep.state_dim):
        raise ConfigError(
            f"{key}: {len(mask)} entries, but the export's actions have {prep.action_dim} and its state "
            f"{prep.state_dim} dimensions"
        )
    return list(mask) if any(mask) else None


def load_lerobot_pi0(
    cls: type[ChunkPolicy],
    directory: str | Path,
    tokenizer_dir: str | Path | None = None,
    policy_type: str = "pi0",
    asset_id: str | None = None,
    delta_action_mask: list[bool] | None = None,
) -> ChunkPolicy:
    """The LeRobot ``policy_type`` (``pi0`` or ``pi05``) folder, or openpi export, ``directory`` as a
    ``cls`` (``Pi0Policy`` / ``Pi05Policy``); ``asset_id`` picks an openpi export's statistics,
    ``delta_action_mask`` marks its actions relative to the state."""
    folder = read_pi_folder(directory, asset_id)
    if folder.policy_type != policy_type:
        told = " (told apart by its weights)" if folder.convention == "openpi" else ""
        raise ConfigError(
            f"config key 'policy.name': {folder.path} is a {folder.convention} {folder.policy_type!r} "
            f"policy{told}, the {policy_type} family loads {policy_type!r} folders "
            f"(policy.name={folder.policy_type})"
        )
    for key, value in (("openpi_asset_id", asset_id), ("openpi_delta_action_mask", delta_action_mask)):
        if value is not None and folder.convention != "openpi":
            raise ConfigError(f"config key 'policy.{key}': {folder.path} is not an openpi export")
    prep = LeRobotPreprocessing.from_folder(folder)
    if delta_action_mask is not None:
        prep.delta_action_mask = checked_delta_mask(delta_action_mask, prep)
    prep.folder_files = (
        folder_json_files(folder.path) if folder.convention == "lerobot" else openpi_files(folder)
    )
    tokenizer = lerobot_tokenizer(folder.path, tokenizer_dir, folder.convention)
    model = load_lerobot_pi0_model(folder)
    cfg = Pi0PolicyConfig(
        action_dim=prep.action_dim,
        camera_keys=prep.cameras,
        max_instruction_tokens=prep.tokenizer_max_length,
        lerobot=prep,
    )
    return cls(model, tokenizer, cfg)
