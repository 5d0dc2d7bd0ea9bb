"""The evaluations of ``benchmarks.hil_pick_place`` in the simulator: the weak start and each session's
learner (the frozen start plus SAC's mean residual), noise-free, on the same fixed episodes; and the
transitions a session's learner saved with its last checkpoint."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from benchmarks import hg_dagger
from benchmarks.hil_classifier import load_start

EVAL_SEED = 50_000
"""Start and final evaluations: episodes from this seed (none of them a session's)."""


def eval_env(worlds: int) -> Any:  # noqa: ANN401 - EnvConfig
    from vla_rl.training.jobs import job_config

    return dataclasses.replace(job_config("off_policy", list(hg_dagger.TASK_ENV)).env, num_envs=worlds)


def scored(result: Any) -> dict[str, float]:  # noqa: ANN401 - EvalResult
    """``success_once``: success on any step (what ends a session's episode); ``success``: at the last."""
    return {
        "success_once_rate": result.success_once_rate,
        "success_rate": result.success_rate,
        "episodes": result.num_episodes,
    }


def evaluate_start(run: Path, episodes: int, worlds: int, execute_steps: int) -> dict[str, float]:
    """The start re-planning every ``execute_steps`` actions, as the actors run it."""
    from vla_rl.training.evaluate import evaluate

    result = evaluate(
        load_start(run),
        eval_env(worlds),
        episodes,
        deterministic=True,
        split="train",
        seed=EVAL_SEED,
        execute_steps=execute_steps,
    )
    return scored(result)


def evaluate_learner(
    run_dir: Path, episodes: int, worlds: int, deterministic: bool = True
) -> dict[str, float]:
    """The learner's last checkpoint on the frozen start: SAC's mean residual, noise-free (or, with
    ``deterministic`` off, its sampled residual, as a session's actor runs it)."""
    from vla_rl.training.off_policy.networks import load_off_policy_run

    policy, wrap = load_off_policy_run(run_dir)
    return evaluate_networks(policy, wrap, episodes, worlds, deterministic)


def evaluate_networks(
    policy: Any,  # noqa: ANN401 - SACPolicy
    wrap: Any,  # noqa: ANN401 - the frozen-policy wrapper
    episodes: int,
    worlds: int,
    deterministic: bool = True,
) -> dict[str, float]:
    """:func:`evaluate_learner` for networks already loaded (``load_off_policy_run``)."""
    from vla_rl.training.evaluate import evaluate

    result = evaluate(
        policy,
        eval_env(worlds),
        episodes,
        deterministic=deterministic,
        split="train",
        seed=EVAL_SEED,
        wrap_env=wrap,
    )
    return scored(result)


def saved_transitions(run_dir: Path, filename: str, in_order: bool = False) -> Any:  # noqa: ANN401
    """Every whole transition (a ``TransitionBatch``) of the replay ``filename`` (the trainer's
    ``REPLAY_FILENAME`` or ``INTERVENTIONS_FILENAME``) in the learner's last checkpoint; None when it
    holds none. ``in_order``: refuse a replay that wrapped, so that the rows are in the order kept."""
    from vla_rl.data.replay_buffer import ReplayBuffer
    from vla_rl.training.checkpoint import resolve_checkpoint_dir

    path = resolve_checkpoint_dir(run_dir) / filename
    if not path.is_file():
        return None
    buffer = ReplayBuffer.load(path)
    if in_order and buffer.num_stored >= buffer.capacity:
        raise ValueError(f"{path}: the replay wrapped, so its slots are not in the order kept")
    return buffer.gather(buffer.valid_slots()) if len(buffer) else None
