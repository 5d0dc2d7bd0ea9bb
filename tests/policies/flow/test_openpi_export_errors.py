"""An openpi PyTorch export that cannot be used as it is: each case is a ``ConfigError`` naming the
setting to give or the file to fix, before any work (the fixtures of ``test_openpi_export``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from openpi_export_steps import FAMILIES, FIXTURES, copy_export
from openpi_export_steps import import_export as load
from openpi_export_steps import observation as raw_observation
from openpi_export_steps import reference as reference_arrays

from vla_rl.config import ConfigError
from vla_rl.policies.registry import load_chunk_policy

TOLERANCE = 1e-4
"""float32 parity with the reference (the issue's bound)."""
ASSET_ID = "tiny/libero_like"


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def policy_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def reference(policy_type: str) -> dict[str, np.ndarray]:
    return reference_arrays(policy_type)


def test_export_without_norm_stats_is_refused(policy_type: str, tmp_path: Path) -> None:
    export = copy_export(policy_type, tmp_path)
    shutil.rmtree(export / "assets")
    with pytest.raises(ConfigError, match="no normalisation statistics"):
        load(policy_type, export)


def test_several_asset_ids_need_the_setting(
    policy_type: str, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    export = copy_export(policy_type, tmp_path)
    shutil.copytree(export / "assets" / ASSET_ID, export / "assets" / "other_robot")
    with pytest.raises(ConfigError, match=r"policy.openpi_asset_id.*\['other_robot', 'tiny/libero_like'\]"):
        load(policy_type, export)
    with pytest.raises(ConfigError, match="policy.openpi_asset_id.*'missing' is not in"):
        load(policy_type, export, openpi_asset_id="missing")
    policy = load(policy_type, export, openpi_asset_id=ASSET_ID)
    actions = policy.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert float(np.abs(actions.numpy() - reference["actions"]).max()) < TOLERANCE


def test_norm_stats_without_the_modes_statistics_are_refused(policy_type: str, tmp_path: Path) -> None:
    export = copy_export(policy_type, tmp_path)
    file = export / "assets" / ASSET_ID / "norm_stats.json"
    stats = json.loads(file.read_text())
    dropped = {"pi0": "std", "pi05": "q99"}[policy_type]
    stats["norm_stats"]["actions"][dropped] = None
    file.write_text(json.dumps(stats))
    with pytest.raises(ConfigError, match=f"'actions'.*lacks \\['{dropped}'\\]"):
        load(policy_type, export)


def test_export_needs_a_tokenizer_dir(policy_type: str) -> None:
    with pytest.raises(ConfigError, match="policy.tokenizer_dir.*openpi's exports never"):
        FAMILIES[policy_type].from_pretrained(str(FIXTURES / policy_type / "policy"))


def test_export_of_the_other_type_is_refused(policy_type: str) -> None:
    other = next(name for name in FAMILIES if name != policy_type)
    with pytest.raises(ConfigError, match=f"told apart by its weights.*policy.name={policy_type}"):
        load(other, FIXTURES / policy_type / "policy")


def test_export_given_to_a_family_without_import_is_refused(policy_type: str) -> None:
    with pytest.raises(ConfigError, match="policy.name.*openpi PyTorch export"):
        load_chunk_policy("flow_mlp", FIXTURES / policy_type / "policy")


def test_weights_of_neither_type_are_refused(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    export = copy_export("pi0", tmp_path)
    weights = load_file(str(export / "model.safetensors"))
    weights["time_mlp_in.weight"] = torch.zeros(16, 16)
    save_file(weights, str(export / "model.safetensors"))
    with pytest.raises(ConfigError, match="not an openpi pi0 or pi0.5 export: it has both"):
        load("pi0", export)


def test_bad_delta_action_masks_are_refused(policy_type: str) -> None:
    with pytest.raises(ConfigError, match="openpi_delta_action_mask.*9 entries.*7 and its state 8"):
        load(policy_type, openpi_delta_action_mask=[True] * 9)
    with pytest.raises(ConfigError, match="openpi_delta_action_mask.*true / false"):
        load(policy_type, openpi_delta_action_mask=[1, 0])
    lerobot = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot" / policy_type
    with pytest.raises(ConfigError, match="policy.openpi_delta_action_mask.*not an openpi export"):
        FAMILIES[policy_type].from_pretrained(
            str(lerobot / "policy"), tokenizer_dir=str(lerobot / "tokenizer"), openpi_delta_action_mask=[True]
        )


def test_folder_of_unknown_kind_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "unknown"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["Something"], "hidden_size": 8}))
    with pytest.raises(ConfigError, match="neither a LeRobot policy folder, an openpi export nor"):
        load_chunk_policy("pi0", folder)


# ----- maths against numbers worked out by hand --------------------------------------------------------
