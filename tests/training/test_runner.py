"""Trainer loop on the toy env: budgets, checkpoints, clean stop, and exact resume."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import toy_env
from toy_env import TOY_OVERRIDES

from vla_rl.config import compose_train_config
from vla_rl.training.checkpoint import list_checkpoints, load_checkpoint
from vla_rl.training.runner import Trainer

STEPS_PER_ITERATION = 8 * 10  # env.num_envs * algorithm.num_steps in TOY_OVERRIDES
TIMING_KEYS = ("perf/",)


def _trainer(run_dir: Path, *extra: str) -> Trainer:
    return Trainer(compose_train_config([*TOY_OVERRIDES, f"run_dir={run_dir}", *extra]))


def _comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.startswith(TIMING_KEYS)}


def test_stops_at_total_env_steps_and_checkpoints(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, f"total_env_steps={3 * STEPS_PER_ITERATION - 1}", "checkpoint_interval=2")
    result = trainer.train()
    assert (result.iterations, result.env_steps, result.stop_reason) == (
        3,
        3 * STEPS_PER_ITERATION,
        "total_env_steps",
    )
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["iter_000002", "iter_000003"]
    assert result.last_checkpoint == tmp_path / "checkpoints" / "iter_000003"
    assert {"rollout/success_rate", "train/policy_loss", "perf/env_steps_per_s", "perf/update_time_s"} <= set(
        result.history[-1]
    )
    assert (tmp_path / "config.yaml").is_file()


def test_exact_resume_matches_uninterrupted_run(tmp_path: Path) -> None:
    straight = _trainer(tmp_path / "straight", f"total_env_steps={4 * STEPS_PER_ITERATION}").train()

    first = _trainer(tmp_path / "split", f"total_env_steps={2 * STEPS_PER_ITERATION}").train()
    assert first.iterations == 2
    resumed_trainer = _trainer(
        tmp_path / "split", f"total_env_steps={4 * STEPS_PER_ITERATION}", f"resume={tmp_path / 'split'}"
    )
    assert resumed_trainer.iteration == 2 and resumed_trainer.env_steps == 2 * STEPS_PER_ITERATION
    second = resumed_trainer.train()
    assert second.iterations == 4

    split_history = [_comparable(m) for m in first.history + second.history]
    straight_history = [_comparable(m) for m in straight.history]
    assert split_history == straight_history
    final_straight = load_checkpoint(tmp_path / "straight").policy_state
    final_split = load_checkpoint(tmp_path / "split").policy_state
    assert all((final_straight[k] == final_split[k]).all() for k in final_straight)


def test_resume_auto_without_checkpoint_starts_fresh(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, "resume=auto", f"total_env_steps={STEPS_PER_ITERATION}")
    assert trainer.iteration == 0
    trainer.train()
    assert _trainer(tmp_path, "resume=auto").iteration == 1


def test_sigterm_stops_after_the_iteration_with_a_checkpoint(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, "total_env_steps=1000000", "checkpoint_interval=1000")
    collect = trainer.collector.collect
    calls = []

    def collect_then_signal(obs, num_decisions):  # noqa: ANN001, ANN202
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return collect(obs, num_decisions)

    trainer.collector.collect = collect_then_signal
    previous_handler = signal.getsignal(signal.SIGTERM)
    result = trainer.train()
    assert (result.stop_reason, result.iterations) == ("interrupted", 2)
    assert load_checkpoint(tmp_path).iteration == 2
    assert signal.getsignal(signal.SIGTERM) is previous_handler


def test_max_minutes_stops_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The clock advances 1 ms each time anything reads it, so how many updates fit in the 0.12 s
    # cap depends on the run's own reads, not on how busy the machine is.
    ticks = iter(range(10**9))
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) * 1e-3)
    trainer = _trainer(tmp_path, "total_env_steps=100000000", "max_minutes=0.002", "eval.num_episodes=0")
    result = trainer.train()
    assert result.stop_reason == "max_minutes"
    assert result.iterations > 0 and result.wall_time_s <= 0.12


def test_max_minutes_keeps_time_for_the_final_evaluation(tmp_path: Path) -> None:
    # A cap of 6 s cannot hold the 10 s kept for the final evaluation: no update starts.
    trainer = _trainer(tmp_path, "total_env_steps=100000000", "max_minutes=0.1", "eval.num_episodes=8")
    result = trainer.train()
    assert (result.stop_reason, result.iterations) == ("max_minutes", 0)
    assert "plan: " in trainer.plan() and "cap 0.1 min, evaluations included" in trainer.plan()


def test_the_final_evaluation_is_budgeted_from_the_rollouts_pace(tmp_path: Path) -> None:
    # 8 episodes on 4 worlds are 2 rounds of the toy env's 10-step episodes: 20 batched steps. The
    # last rollout took 0.5 s for its 10 batched steps (0.05 s each): 2 x 20 x 0.05 + 10 = 12 s.
    trainer = _trainer(tmp_path, "eval.num_episodes=8", "eval.num_envs=4")
    assert trainer.final_evaluation_s([]) == pytest.approx(10.0)
    assert trainer.final_evaluation_s([{"perf/rollout_time_s": 0.5}]) == pytest.approx(12.0)
    assert (
        _trainer(tmp_path / "none", "eval.num_episodes=0").final_evaluation_s([{"perf/rollout_time_s": 0.5}])
        == 0
    )


def test_invalid_resume_path_fails(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _trainer(tmp_path, f"resume={tmp_path / 'missing'}")


def test_env_is_seeded_from_config(tmp_path: Path) -> None:
    a = _trainer(tmp_path / "a", "seed=3")
    b = _trainer(tmp_path / "b", "seed=3")
    assert (a.source.obs["privileged"] == b.source.obs["privileged"]).all()
    assert isinstance(a.env, toy_env.ToyPointEnv)


MUJOCO_OVERRIDES = [
    "env=push",
    "env.num_envs=4",
    "env.num_threads=2",
    "algorithm.num_steps=30",  # episodes of 80 steps end inside the third iteration: autoreset is covered
    "algorithm.num_minibatches=2",
    "algorithm.num_epochs=2",
    "policy.hidden_sizes=[32,32]",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "max_minutes=0",
]


@pytest.mark.slow
@pytest.mark.parametrize("stages", [1, 2])
def test_exact_resume_on_mujoco_push(tmp_path: Path, stages: int) -> None:
    """Resume restores simulator state (physics, randomised colours, RNGs) as well as the learner,
    also for a pipelined rollout over two stages of worlds."""
    steps_per_iteration = 4 * 30

    def trainer(run_dir: Path, *extra: str) -> Trainer:
        overrides = [*MUJOCO_OVERRIDES, f"env.pipeline_stages={stages}", f"run_dir={run_dir}", *extra]
        return Trainer(compose_train_config(overrides))

    straight = trainer(tmp_path / "straight", f"total_env_steps={4 * steps_per_iteration}").train()
    first = trainer(tmp_path / "split", f"total_env_steps={2 * steps_per_iteration}").train()
    second = trainer(
        tmp_path / "split", f"total_env_steps={4 * steps_per_iteration}", f"resume={tmp_path / 'split'}"
    ).train()

    split_history = [_comparable(m) for m in first.history + second.history]
    assert split_history == [_comparable(m) for m in straight.history]
    assert any(m["rollout/episodes"] > 0 for m in straight.history[2:])
