"""``vla-rl train recipe=pi0_flow_sde_ppo policy.init_from=<openpi pi0 export>`` on MuJoCo ``reach``: the
export (8-dim state, 7-dim actions relative to the state on 6 of them, camera slots base / left wrist /
right wrist) meets the env (24-dim proprio, 4 ``ee_delta_pos`` actions, cameras top and wrist) through
the maps and ``policy.openpi_delta_action_mask``; a tiny run completes, its checkpoint keeps openpi's
preprocessing and reloads, and the run resumes."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from import_run import reach_run_overrides

from vla_rl.cli import main
from vla_rl.policies.registry import load_chunk_policy

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "openpi" / "pi0"
SETTINGS = [
    f"policy.init_from={FIXTURE / 'policy'}",
    f"policy.tokenizer_dir={FIXTURE / 'tokenizer'}",
    "policy.openpi_delta_action_mask=[true,true,true,true,true,true,false]",
    "policy.action_map.index=[0,1,2,6]",
    "policy.state_map.index=[15,16,17,null,null,null,14,14]",
    "policy.camera_map={base_0_rgb: top, left_wrist_0_rgb: wrist, right_wrist_0_rgb: null}",
]


def run_overrides(run_dir: Path) -> list[str]:
    """The shared tiny run (``import_run``) of the openpi pi0 export with its settings and maps."""
    return reach_run_overrides(run_dir, *SETTINGS)


def test_the_openpi_pi0_export_fine_tunes_on_reach(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    assert main(["train", *run_overrides(run_dir), "iterations=2"]) == 0
    assert "trained 2 iterations" in capsys.readouterr().out
    evaluations = json.loads((run_dir / "evaluations.json").read_text())
    assert [entry["iteration"] for entry in evaluations] == [0, 2]
    saved = load_chunk_policy("pi0", run_dir / "checkpoints" / "iter_000002" / "policy")
    prep = saved.cfg.lerobot
    assert (prep.convention, prep.delta_action_mask) == ("openpi", [True] * 6 + [False])
    assert prep.maps.camera_map == {
        "base_0_rgb": "top",
        "left_wrist_0_rgb": "wrist",
        "right_wrist_0_rgb": None,
    }
    assert saved.action_dim == 4
    start = load_chunk_policy("pi0", FIXTURE / "policy", str(FIXTURE / "tokenizer"))
    assert not torch.equal(saved.model.action_out_proj.weight, start.model.action_out_proj.weight)
    assert main(["train", "--resume", str(run_dir), "iterations=3"]) == 0
    assert "trained 3 iterations" in capsys.readouterr().out
