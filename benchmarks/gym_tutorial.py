"""The Gymnasium tutorial's training, measured: mean return before and after a 2-minute run.

For each task (Reacher-v5 and Pusher-v5 by default) this runs what the tutorial's command

    vla-rl train env.backend=gymnasium env.task=<id> max_minutes=2

runs (the same composed config, ``Trainer.train`` then a greedy evaluation), with a greedy
evaluation of the freshly initialised policy before it, and writes the table as JSON and markdown
under ``benchmarks/results/`` (``gym_tutorial.json``, ``gym_tutorial.md``).

    python -m benchmarks.gym_tutorial                  # the 2-minute runs
    python -m benchmarks.gym_tutorial --minutes 0.2 --num-envs 4 --total-env-steps 256 \
        --eval-episodes 2 --results-dir /tmp/gym_tutorial   # a quick check that it works
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line
from vla_rl.config import compose_train_config

TASKS = ("Reacher-v5", "Pusher-v5")


@dataclass
class TutorialRow:
    task: str
    command: str
    """The tutorial's command line for this task (size overrides of a quick check included)."""
    env_steps: int
    iterations: int
    train_minutes: float
    """Wall time of training, evaluations excluded."""
    stop_reason: str
    return_before: float
    """Mean return of the greedy (mean-action) policy before training."""
    return_after: float
    """Mean return of the greedy policy after training."""
    eval_episodes: int

    @property
    def gain(self) -> float:
        return self.return_after - self.return_before


def tutorial_overrides(task: str, minutes: float) -> list[str]:
    """The overrides of the tutorial's command for ``task``."""
    return ["env.backend=gymnasium", f"env.task={task}", f"max_minutes={minutes:g}"]


def run_task(task: str, minutes: float, size: list[str], run_dir: Path) -> TutorialRow:
    from vla_rl.training.runner import Trainer

    overrides = tutorial_overrides(task, minutes) + size
    cfg = compose_train_config(
        [*overrides, f"run_dir={run_dir}", "eval.video=false", "logger.wandb_mode=disabled"]
    )
    trainer = Trainer(cfg)
    try:
        before = trainer.evaluate(video=False)
        result = trainer.train()
        after = trainer.evaluate(video=False)
    finally:
        trainer.close()
    return TutorialRow(
        task=task,
        command="vla-rl train " + " ".join(overrides),
        env_steps=result.env_steps,
        iterations=result.iterations,
        train_minutes=result.wall_time_s / 60.0,
        stop_reason=result.stop_reason,
        return_before=before.mean_return,
        return_after=after.mean_return,
        eval_episodes=cfg.eval.num_episodes,
    )


def markdown(rows: list[TutorialRow], machine: str) -> str:
    lines = [
        "# Gymnasium tutorial: mean return before and after training",
        "",
        f"Machine: {machine}.",
        "",
        "Greedy (mean-action) evaluation of the freshly initialised policy and of the trained one",
        "(`python -m benchmarks.gym_tutorial`).",
        "",
        "| task | command | env steps | iterations | train min | return before | return after | gain |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.task} | `{row.command}` | {row.env_steps:,} | {row.iterations} "
            f"| {row.train_minutes:.2f} | {row.return_before:.2f} | {row.return_after:.2f} "
            f"| {row.gain:+.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), help="Gymnasium ids")
    parser.add_argument("--minutes", type=float, default=2.0, help="max_minutes of each training run")
    parser.add_argument("--num-envs", type=int, default=None, help="env.num_envs (default: the config's)")
    parser.add_argument(
        "--total-env-steps", type=int, default=None, help="total_env_steps (default: the config's)"
    )
    parser.add_argument(
        "--eval-episodes", type=int, default=None, help="eval.num_episodes (default: the config's)"
    )
    parser.add_argument(
        "--results-dir", type=Path, default=RESULTS_DIR, help="where the JSON and markdown go"
    )
    add_results_name(parser, "gym_tutorial")
    args = parser.parse_args()

    os.environ.setdefault("WANDB_MODE", "disabled")
    size = []
    if args.num_envs is not None:
        size.append(f"env.num_envs={args.num_envs}")
    if args.total_env_steps is not None:
        size.append(f"total_env_steps={args.total_env_steps}")
    if args.eval_episodes is not None:
        size.append(f"eval.num_episodes={args.eval_episodes}")
    machine = machine_line()
    print(f"machine: {machine}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gym_tutorial_") as runs:
        for task in args.tasks:
            row = run_task(task, args.minutes, size, Path(runs) / task)
            rows.append(row)
            print(
                f"{task}: {row.env_steps:,} env steps in {row.train_minutes:.2f} min ({row.stop_reason}), "
                f"mean return {row.return_before:.2f} -> {row.return_after:.2f} ({row.gain:+.2f})"
            )
    args.results_dir.mkdir(parents=True, exist_ok=True)
    table = {"machine": machine, "rows": [{**asdict(row), "gain": row.gain} for row in rows]}
    json_path = args.results_dir / f"{args.results_name}.json"
    md_path = args.results_dir / f"{args.results_name}.md"
    json_path.write_text(json.dumps(table, indent=2) + "\n")
    md_path.write_text(markdown(rows, machine))
    print(f"wrote {json_path} and {md_path}")


if __name__ == "__main__":
    main()
