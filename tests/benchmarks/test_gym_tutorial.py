"""The Gymnasium tutorial benchmark runs the tutorial's command and tabulates before/after returns."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.gym_tutorial import TutorialRow, markdown, run_task, tutorial_overrides


def test_the_table_shows_the_gain_of_each_task() -> None:
    row = TutorialRow(
        task="Reacher-v5",
        command="vla-rl train env.backend=gymnasium env.task=Reacher-v5 max_minutes=2",
        env_steps=1_234_567,
        iterations=150,
        train_minutes=2.004,
        stop_reason="max_minutes",
        return_before=-42.25,
        return_after=-6.75,
        eval_episodes=64,
    )
    assert row.gain == pytest.approx(35.5)
    table = markdown([row], "a machine")
    assert "| Reacher-v5 | `vla-rl train env.backend=gymnasium env.task=Reacher-v5 max_minutes=2` |" in table
    assert "| 1,234,567 | 150 | 2.00 | -42.25 | -6.75 | +35.50 |" in table


def test_a_tiny_run_trains_and_evaluates_before_and_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert tutorial_overrides("Pusher-v5", 2.0) == [
        "env.backend=gymnasium",
        "env.task=Pusher-v5",
        "max_minutes=2",
    ]
    size = ["env.num_envs=2", "algorithm.num_steps=16", "total_env_steps=64", "eval.num_episodes=2"]
    row = run_task("Pusher-v5", 2.0, size, tmp_path / "run")
    assert (row.env_steps, row.iterations, row.stop_reason, row.eval_episodes) == (
        64,
        2,
        "total_env_steps",
        2,
    )
    assert row.command.startswith("vla-rl train env.backend=gymnasium env.task=Pusher-v5 max_minutes=2 ")
    # Pusher's reward is a negative distance and control cost: every episode's return is below 0.
    assert row.return_before < 0 and row.return_after < 0
