"""``vla-rl export --format openpi``: a pi0 / pi0.5 imported from an openpi export, written back as one.

With no update in between, the export is the imported one: the same weight names, values (bit for
bit; pi0.5's unused expert output head as zeros) and safetensors metadata, the same config.json and
statistics. After SFT and policy-gradient
updates, the export re-imported acts as the fine-tuned policy. Whether openpi's own code runs the export
and agrees is ``tests/lerobot/test_openpi_export_runs_in_openpi.py`` (it needs openpi).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from openpi_export_steps import CAMERA_MAP, FAMILIES, FIXTURES, actions, fine_tune, import_export, reference
from safetensors import safe_open
from safetensors.torch import load_file

from vla_rl.cli import main
from vla_rl.config import ConfigError
from vla_rl.policies.env_maps import EnvMaps
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.lerobot_export import export_lerobot
from vla_rl.policies.lora import LoraSettings

ASSET_STATS = "assets/tiny/libero_like/norm_stats.json"
TOLERANCE = 1e-4


@pytest.fixture(params=sorted(FAMILIES))
def policy_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_export_without_updates_is_the_imported_export(policy_type: str, tmp_path: Path) -> None:
    out = export_lerobot(import_export(policy_type), tmp_path / "out", folder_format="openpi")
    original = FIXTURES / policy_type / "policy"
    ours, theirs = load_file(str(out / "model.safetensors")), load_file(str(original / "model.safetensors"))
    assert ours.keys() == theirs.keys()
    # pi0.5's expert output head is applied by neither openpi nor transformers, whose PI05 has no module
    # for it: the import drops it and the export writes zeros of its shape (openpi's loader needs the key)
    unused = "paligemma_with_expert.gemma_expert.lm_head.weight"
    for name, values in theirs.items():
        if policy_type == "pi05" and name == unused:
            assert ours[name].shape == values.shape and not ours[name].any()
            continue
        assert torch.equal(ours[name], values), name
    with (
        safe_open(str(out / "model.safetensors"), "pt") as a,
        safe_open(str(original / "model.safetensors"), "pt") as b,
    ):
        assert a.metadata() == b.metadata()
    assert json.loads((out / "config.json").read_text()) == json.loads((original / "config.json").read_text())
    assert json.loads((out / ASSET_STATS).read_text()) == json.loads((original / ASSET_STATS).read_text())


def test_fine_tuned_export_acts_as_the_fine_tuned_policy(policy_type: str, tmp_path: Path) -> None:
    arrays = reference(policy_type)
    policy = import_export(policy_type)
    fine_tune(policy, arrays)
    tuned = actions(policy, arrays)
    assert float((tuned - torch.as_tensor(arrays["actions"])).abs().max()) > 10 * TOLERANCE  # it moved
    out = export_lerobot(policy, tmp_path / "out", folder_format="openpi")
    again = FAMILIES[policy_type].from_pretrained(str(out))  # its tokenizer/ is in the export
    again.set_env_maps(EnvMaps(camera_map=dict(CAMERA_MAP)))
    torch.testing.assert_close(actions(again, arrays), tuned, rtol=0, atol=1e-6)


def test_vla_rl_export_command_tells_the_family_from_the_weights(
    policy_type: str, tmp_path: Path, capsys
) -> None:
    fixture = FIXTURES / policy_type
    command = ["export", "--format", "openpi", str(fixture / "policy"), str(tmp_path / "out")]
    assert main([*command, "--tokenizer-dir", str(fixture / "tokenizer")]) == 0
    assert f"exported the {policy_type} policy" in capsys.readouterr().out
    assert (tmp_path / "out" / ASSET_STATS).is_file()


def test_export_of_a_lerobot_import_is_refused(tmp_path: Path) -> None:
    lerobot = FIXTURES.parent / "lerobot" / "pi0"
    policy = Pi0Policy.from_pretrained(str(lerobot / "policy"), tokenizer_dir=str(lerobot / "tokenizer"))
    with pytest.raises(ConfigError, match="imported from a LeRobot folder.*--format lerobot"):
        export_lerobot(policy, tmp_path / "out", folder_format="openpi")


def test_kept_lora_adapters_are_refused(tmp_path: Path) -> None:
    policy = import_export("pi0")
    policy.add_lora(LoraSettings(rank=2, alpha=4.0))
    with pytest.raises(ConfigError, match="--keep-lora has no openpi form"):
        export_lerobot(policy, tmp_path / "out", keep_lora=True, folder_format="openpi")
    merged = export_lerobot(policy, tmp_path / "merged", folder_format="openpi")
    assert (merged / "model.safetensors").is_file()
