"""``vla-rl train recipe=pi0_flow_sde_ppo policy.init_from=<LeRobot pi0 folder>`` on MuJoCo ``reach``:
the folder (8-dim state, 7-dim actions, cameras front and wrist) meets the env (24-dim proprio, 4
``ee_delta_pos`` actions, cameras top and wrist) only through ``policy.action_map`` / ``state_map`` /
``camera_map``. Without them the trainer stops with a ``ConfigError`` before any update; with them a
tiny run completes and its checkpoint reloads with the maps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from import_run import reach_run_overrides

from vla_rl.cli import main
from vla_rl.config.load import ConfigError
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer, evaluate_rl_policy

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot" / "pi0"
MAPS = [
    "policy.action_map.index=[0,1,2,6]",  # xyz and the gripper of the checkpoint's 7
    "policy.state_map.index=[15,16,17,null,null,null,14,14]",  # TCP position, -, finger opening twice
    "policy.camera_map={front: top}",  # the checkpoint's front camera reads the env's top camera
]


def run_overrides(run_dir: Path) -> list[str]:
    """The shared tiny run (``import_run``) of the LeRobot pi0 fixture; add the maps and ``iterations=``."""
    return reach_run_overrides(
        run_dir, f"policy.init_from={FIXTURE / 'policy'}", f"policy.tokenizer_dir={FIXTURE / 'tokenizer'}"
    )


@pytest.mark.parametrize(
    ("left_out", "message"),
    [
        (
            "policy.action_map",
            r"'policy.action_map': the checkpoint's actions have 7 dimensions, the env's 4",
        ),
        (
            "policy.state_map",
            r"'policy.state_map': the checkpoint's state has 8 dimensions, the env's state 24",
        ),
        ("policy.camera_map", r"'policy.camera_map': the checkpoint's cameras \['front'\] are not cameras"),
    ],
)
def test_the_trainer_stops_before_training_without_a_needed_map(
    tmp_path: Path, left_out: str, message: str
) -> None:
    maps = [override for override in MAPS if not override.startswith(left_out)]
    cfg = compose_rl_config([*run_overrides(tmp_path / "run"), *maps, "iterations=1"])
    with pytest.raises(ConfigError, match=message):
        ChunkRLTrainer(cfg)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_map_entry_beyond_the_envs_state_stops_vla_rl_train(tmp_path: Path) -> None:
    maps = [*MAPS[:1], "policy.state_map.index=[15,16,17,null,null,null,14,24]", MAPS[2]]
    assert main(["train", *run_overrides(tmp_path / "run"), *maps, "iterations=1"]) == 2


def test_the_lerobot_pi0_fixture_fine_tunes_on_reach_through_the_maps(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    assert main(["train", *run_overrides(run_dir), *MAPS, "iterations=2"]) == 0
    assert "trained 2 iterations" in capsys.readouterr().out
    evaluations = json.loads((run_dir / "evaluations.json").read_text())
    assert [entry["iteration"] for entry in evaluations] == [0, 2]
    saved = load_chunk_policy("pi0", run_dir / "checkpoints" / "iter_000002" / "policy")
    maps = saved.cfg.lerobot.maps
    assert maps.action_map.index == [0, 1, 2, 6]
    assert maps.state_map.index == [15, 16, 17, None, None, None, 14, 14]
    assert maps.camera_map == {"front": "top"}
    assert saved.action_dim == 4
    start = load_chunk_policy("pi0", FIXTURE / "policy", str(FIXTURE / "tokenizer"))
    trained = saved.model.action_out_proj.weight  # the action expert's output trains (the VLM is frozen)
    assert not torch.equal(trained, start.model.action_out_proj.weight)
    # an evaluation of the checkpoint on an env without the cameras its maps name stops at once
    cfg = compose_rl_config([*run_overrides(run_dir), *MAPS, "env.cameras=[front]"])
    with pytest.raises(ConfigError, match=r"'policy.camera_map': .*\['wrist'\] .*\{'front': 'top'\}"):
        evaluate_rl_policy(saved, cfg, "train", num_episodes=1)
    # resumed, the run reads the maps back from its checkpoint and config and goes on
    assert main(["train", "--resume", str(run_dir), "iterations=3"]) == 0
    assert "trained 3 iterations" in capsys.readouterr().out
