"""Sample efficiency: RLPD with 20 scripted demonstrations vs the committed PPO recipe, on ``push`` and
``lift`` from state, side by side (issue 86, item 1).

For each task:

1. ``vla-rl collect`` records ``--demos`` expert episodes (state only, with rewards);
2. ``vla-rl train algorithm=rlpd`` from those demonstrations, with the settings in ``RLPD_OVERRIDES``,
   for ``--rlpd-env-steps``, evaluated every ``--rlpd-eval-every`` env steps;
3. ``vla-rl train env=<task>``, the committed PPO recipe unchanged (128 worlds x 32 steps = 4,096 env
   steps per update), for ``--ppo-env-steps``, with a checkpoint every ``--ppo-checkpoint-every``
   updates; every checkpoint is then evaluated in this process.

Both learners are scored by the same evaluation (``vla_rl.training.evaluate.evaluate_run``: 64
deterministic episodes on the train split, the run's evaluation seed). The table gives, per task and
learner, the env steps of the first evaluation at or above 80 % success, the success at RLPD's
budget (PPO: its last checkpoint at or before that many env steps) and at the end, and the ratio of
the env steps to 80 % (the target: RLPD at most one tenth of PPO's). Budgets count env steps; the
wall-clock of each run is reported beside them.

    python -m benchmarks.rlpd_vs_ppo [--tasks push lift] [--summarise]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line, run_logged

TASKS = ("push", "lift")
TARGET_SUCCESS = 0.80
EVAL_EPISODES = 64
RLPD_OVERRIDES = (
    "algorithm=rlpd",
    "env.num_envs=4",
    "algorithm.num_critics=2",
    "algorithm.utd_ratio=16",
    "algorithm.init_alpha=0.01",
)
"""RLPD as declared in benchmarks/results/rlpd_vs_ppo.md: symmetric sampling (half of each minibatch
from the demonstrations), LayerNorm critics, 4 worlds, 16 critic steps per batched step (4 per
transition), 2 critics, initial temperature 0.01."""
CLI = (sys.executable, "-m", "vla_rl.cli")
QUIET = ("logger.wandb_mode=disabled",)

Curve = list[tuple[int, float]]
"""(env steps, success rate) of each evaluation, in order."""


def finished_minutes(log: Path) -> float | None:
    """Minutes of a finished ``vla-rl train`` run from its log's ``trained ... in X min`` line; None
    when the log is missing or the run has not finished."""
    found = re.search(r"in ([0-9.]+) min \(", log.read_text()) if log.exists() else None
    return None if found is None else float(found.group(1))


def train(command: list[str], log: Path) -> float:
    """Seconds of wall-clock of the ``vla-rl train`` ``command``; a run that ``log`` says finished is
    reused (a rerun of the benchmark completes what an earlier one left)."""
    minutes = finished_minutes(log)
    return 60.0 * minutes if minutes is not None else run_logged(command, log)


def collect_demos(task: str, count: int, root: Path) -> Path:
    """``count`` expert episodes of ``task`` (state only) under ``root``; their folder (kept when an
    earlier run wrote it)."""
    out = root / f"{task}_demos"
    if not (out / "meta" / "info.json").exists():
        command = [*CLI, "collect", f"env={task}", "env.cameras=[]", f"env.num_envs={count}"]
        command += [f"num_episodes={count}", f"output_dir={out}"]
        run_logged(command, root / f"{task}_collect.log")
    return out


def run_rlpd(task: str, demos: Path, env_steps: int, eval_every: int, root: Path) -> tuple[Curve, float]:
    """The RLPD run's evaluations and its wall-clock seconds."""
    run_dir = root / f"{task}_rlpd"
    command = [*CLI, "train", f"env={task}", *RLPD_OVERRIDES, f"demos.path={demos}", *QUIET]
    command += [f"total_env_steps={env_steps}", f"eval.interval_env_steps={eval_every}"]
    command += [f"eval.num_episodes={EVAL_EPISODES}", "max_minutes=600", f"run_dir={run_dir}"]
    seconds = train(command, root / f"{task}_rlpd.log")
    curve = []
    for path in sorted((run_dir / "eval").glob("eval_env_step_*.json")):
        steps = int(path.stem.rsplit("_", 1)[1])
        curve.append((steps, json.loads(path.read_text())["success_rate"]))
    return curve, seconds


def run_ppo(task: str, env_steps: int, checkpoint_every: int, root: Path) -> tuple[Path, float]:
    """The PPO run's folder and its wall-clock seconds (training and its final evaluation)."""
    run_dir = root / f"{task}_ppo"
    command = [*CLI, "train", f"env={task}", f"total_env_steps={env_steps}", "max_minutes=600", *QUIET]
    command += [f"checkpoint_interval={checkpoint_every}", "keep_checkpoints=100000", "eval.video=false"]
    command.append(f"run_dir={run_dir}")
    return run_dir, train(command, root / f"{task}_ppo.log")


def evaluate_checkpoints(run_dir: Path, max_env_steps: int) -> Curve:
    """Every checkpoint of a PPO run up to ``max_env_steps``, evaluated as the RLPD run's evaluations
    are."""
    import torch

    from vla_rl.config import load_train_config_file
    from vla_rl.training.checkpoint import CONFIG_FILENAME, load_trained_actor_critic
    from vla_rl.training.evaluate import evaluate_run

    curve = []
    for directory in sorted((run_dir / "checkpoints").glob("iter_*")):
        cfg = load_train_config_file(directory / CONFIG_FILENAME, [])
        updates = int(directory.name.split("_")[1])
        env_steps = updates * cfg.env.num_envs * cfg.algorithm.num_steps
        if env_steps > max_env_steps:
            break
        torch.set_num_threads(cfg.torch_num_threads)
        policy = load_trained_actor_critic(cfg, directory)
        result = evaluate_run(policy, cfg, None, False, num_episodes=EVAL_EPISODES)
        curve.append((env_steps, result.success_rate))
    return curve


def steps_to(curve: Curve, target: float) -> int | None:
    """Env steps of the first evaluation at or above ``target``; None when none reached it."""
    return next((steps for steps, success in curve if success >= target), None)


def success_at(curve: Curve, env_steps: int) -> float | None:
    """Success of the last evaluation at or before ``env_steps`` (None: no evaluation by then)."""
    before = [success for steps, success in curve if steps <= env_steps]
    return before[-1] if before else None


def summarise(results: dict) -> str:
    """The markdown table of ``results`` (the JSON this benchmark writes)."""
    budget = results["rlpd_env_steps"]
    lines = [
        f"Measured {results['machine']}.",
        "",
        f"| task | learner | env steps to {100 * TARGET_SUCCESS:.0f} % | success at {budget:,} env steps | "
        "final success (env steps) | wall-clock | ratio of env steps to 80 % (RLPD / PPO) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]

    def pct(value: float | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f} %"

    for task, entry in results["tasks"].items():
        to_target = {name: steps_to(entry[name]["curve"], TARGET_SUCCESS) for name in ("rlpd", "ppo")}
        ratio = "n/a"
        if to_target["rlpd"] is not None and to_target["ppo"] is not None:
            ratio = f"{to_target['rlpd'] / to_target['ppo']:.3f}"
        elif to_target["ppo"] is not None:
            ratio = f"> {budget / to_target['ppo']:.3f}"
        for name in ("rlpd", "ppo"):
            curve = entry[name]["curve"]
            reached = "not reached" if to_target[name] is None else f"{to_target[name]:,}"
            final_steps, final = curve[-1] if curve else (0, None)
            lines.append(
                f"| {task} | {name.upper()} | {reached} | {pct(success_at(curve, budget))} | "
                f"{pct(final)} ({final_steps:,}) | {entry[name]['wall_s'] / 60:.1f} min | "
                f"{ratio if name == 'rlpd' else ''} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--demos", type=int, default=20)
    parser.add_argument("--rlpd-env-steps", type=int, default=48_000)
    parser.add_argument("--rlpd-eval-every", type=int, default=4_000)
    parser.add_argument("--ppo-env-steps", type=int, default=4_096_000)
    parser.add_argument("--ppo-checkpoint-every", type=int, default=10, help="updates")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/rlpd_vs_ppo"))
    parser.add_argument("--summarise", action="store_true", help="only rewrite the table from the JSON")
    add_results_name(parser, "rlpd_vs_ppo")
    args = parser.parse_args(argv)
    json_path = RESULTS_DIR / f"{args.results_name}.json"
    if args.summarise:
        print(summarise(json.loads(json_path.read_text())))
        return
    results = {
        "machine": machine_line(),
        "rlpd_env_steps": args.rlpd_env_steps,
        "ppo_env_steps": args.ppo_env_steps,
        "rlpd_overrides": list(RLPD_OVERRIDES),
        "demos": args.demos,
        "tasks": {},
    }
    if json_path.exists():
        results["tasks"] = json.loads(json_path.read_text()).get("tasks", {})
    for task in args.tasks:
        root = args.work_dir / task
        root.mkdir(parents=True, exist_ok=True)
        demos = collect_demos(task, args.demos, root)
        rlpd_curve, rlpd_s = run_rlpd(task, demos, args.rlpd_env_steps, args.rlpd_eval_every, root)
        print(f"{task} RLPD: {rlpd_curve}", flush=True)
        ppo_dir, ppo_s = run_ppo(task, args.ppo_env_steps, args.ppo_checkpoint_every, root)
        ppo_curve = evaluate_checkpoints(ppo_dir, args.ppo_env_steps)
        print(f"{task} PPO: {ppo_curve}", flush=True)
        results["tasks"][task] = {
            "rlpd": {"curve": rlpd_curve, "wall_s": rlpd_s},
            "ppo": {"curve": ppo_curve, "wall_s": ppo_s},
        }
        json_path.write_text(json.dumps(results, indent=2) + "\n")
    print(summarise(results))


if __name__ == "__main__":
    main()
