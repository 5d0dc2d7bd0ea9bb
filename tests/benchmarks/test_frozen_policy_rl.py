"""The frozen-policy benchmark: the quick run trains residual RL, DSRL and the on-policy recipe from the
committed pi0 start for the same control steps and scores all of them with one evaluation; the
budget conversions and the table by hand."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from benchmarks import frozen_policy_rl


@pytest.mark.slow
def test_quick_run_trains_every_learner_for_the_same_control_steps_and_evaluates_them_alike(
    tmp_path: Path,
) -> None:
    work, results_dir = tmp_path / "work", tmp_path / "results"
    argv = ["--quick", "--threads", "1", "--work-dir", str(work), "--results-dir", str(results_dir)]
    frozen_policy_rl.main(argv)  # about 40 s on 2 busy cores
    results = json.loads((results_dir / "frozen_policy_rl_quick.json").read_text())
    assert results["quick"] and results["start_path"] == "benchmarks/starts/pi0_200_start5"
    learners = results["learners"]
    assert list(learners) == ["residual", "dsrl", "on_policy"]
    # 32 control steps each: 32 residual transitions, 16 DSRL chunks of 2 actions, 2 updates of
    # 2 worlds x 4 decisions x 2 actions.
    assert {name: row["env_steps"] for name, row in learners.items()} == dict.fromkeys(learners, 32)
    assert "trained 32 updates" not in (work / "dsrl.log").read_text()
    assert "16 env steps in" in (work / "dsrl.log").read_text()
    assert "trained 2 iterations" in (work / "on_policy.log").read_text()
    for row in [results["start"], *learners.values()]:
        assert row["episodes"] == 2 and 0.0 <= row["success_rate"] <= 1.0
    assert "frozen_policy=dsrl" in learners["dsrl"]["command"]
    assert f"recipe={frozen_policy_rl.ON_POLICY_RECIPE}" in learners["on_policy"]["command"]
    table = (results_dir / "frozen_policy_rl_quick_table.md").read_text()
    assert "| start (frozen pi0) |" in table and "| DSRL (SAC) |" in table


def args_for(env_steps: int, learning_starts: int = 1024) -> argparse.Namespace:
    return argparse.Namespace(
        env_steps=env_steps,
        learning_starts=learning_starts,
        threads=2,
        seed=0,
        env_overrides=[],
        off_policy_overrides=[],
        on_policy_overrides=[],
    )


def test_dsrl_budget_counts_chunks_and_residual_budget_counts_control_steps() -> None:
    args = args_for(204_800)
    dsrl = frozen_policy_rl.off_policy_command("dsrl", 204_800, args)
    residual = frozen_policy_rl.off_policy_command("residual", 204_800, args)
    assert "total_env_steps=102400" in dsrl and "replay.learning_starts=512" in dsrl
    assert "total_env_steps=204800" in residual and "replay.learning_starts=1024" in residual
    assert "algorithm.gamma=0.980100" in dsrl  # 0.99 per control step over a chunk of 2


def test_on_policy_budget_is_whole_updates_of_the_recipe() -> None:
    # pi0_flow_sde_ppo: 64 worlds x 16 decisions x 2 actions = 2,048 control steps per update.
    command, steps = frozen_policy_rl.on_policy_command(204_800, args_for(204_800))
    assert "iterations=100" in command and steps == 204_800
    command, steps = frozen_policy_rl.on_policy_command(5_000, args_for(5_000))
    assert "iterations=2" in command and steps == 4_096


def test_table_gives_each_gain_over_the_start_in_points() -> None:
    results = {
        "machine": "m",
        "start_path": "benchmarks/starts/pi0_200_start5",
        "env_steps": 204_800,
        "eval_worlds": 64,
        "start": {"success_rate": 0.453125, "episodes": 512},
        "learners": {
            "residual": {"success_rate": 0.5, "episodes": 512, "env_steps": 204_800, "wall_s": 1_800.0},
            "on_policy": {"success_rate": 0.40625, "episodes": 512, "env_steps": 204_800, "wall_s": 600.0},
        },
    }
    table = frozen_policy_rl.summarise(results)
    # sqrt(0.453125 * 0.546875 / 512) = 2.2 points; 50.0 - 45.3 = +4.7; 40.6 - 45.3 = -4.7
    assert "| start (frozen pi0) | 45.3 % (± 2.2) |" in table
    assert "| residual RL (SAC) | 50.0 % (± 2.2) | +4.7 | 204,800 | 30.0 min |" in table
    assert "| pi0_flow_sde_ppo (on-policy) | 40.6 % (± 2.2) | -4.7 | 204,800 | 10.0 min |" in table
