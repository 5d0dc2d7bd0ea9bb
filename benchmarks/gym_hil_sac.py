"""LeRobot's HIL-SERL SAC and this toolkit's RLPD side by side on gym-hil's pick-cube from state
(issue 86, item 7).

1. ``python -m vla_rl.data.gym_hil_collect`` writes ``--demos`` scripted expert episodes once, as a
   LeRobot v3.0 dataset that both learners read;
2. LeRobot 0.4.2's SAC (``benchmarks/lerobot_gym_hil_sac.py``, run by .venv-lerobot's Python) learns
   from it for ``--env-steps``;
3. ``vla-rl train algorithm=rlpd env=gym_hil_pick_cube demos.path=...`` does the same, with the
   settings in ``RLPD_OVERRIDES``.

Both are then evaluated with ``--eval-episodes`` deterministic episodes; the table gives success and
wall-clock seconds per env step (the whole run, its final evaluation included, over its env steps;
LeRobot's also as the median of its learning steps). Declaration: benchmarks/results/gym_hil_sac.md.

    python -m benchmarks.gym_hil_sac [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, lerobot_env, machine_line, run_logged

REPO = Path(__file__).resolve().parents[1]
CLI = (sys.executable, "-m", "vla_rl.cli")
RLPD_OVERRIDES = (
    "algorithm=rlpd",
    "env=gym_hil_pick_cube",
    "env.num_envs=1",
    "algorithm.num_critics=2",
    "algorithm.utd_ratio=4",
    "algorithm.init_alpha=0.01",
    "demos.success_terminates=true",
    "logger.wandb_mode=disabled",
)
"""RLPD as declared in benchmarks/results/gym_hil_sac.md: one world, 4 critic steps per env step,
2 LayerNorm critics, initial temperature 0.01, half of each minibatch from the demonstrations, whose
last step is terminal (gym-hil ends an episode at its success)."""


def lerobot_python() -> Path | None:
    """``LR_PYTHON``, else the repository's .venv-lerobot; ``None`` when neither exists."""
    configured = os.environ.get("LR_PYTHON")
    path = Path(configured) if configured else REPO / ".venv-lerobot" / "bin" / "python"
    return path if path.is_file() else None


def collect_demos(count: int, root: Path, python: Path) -> tuple[Path, float]:
    """The shared demonstrations (kept when an earlier run wrote them) and the expert's success."""
    out = root / "demos"
    log = root / "collect.log"
    if not (out / "meta" / "info.json").exists():
        command = [sys.executable, "-m", "vla_rl.data.gym_hil_collect", f"--episodes={count}"]
        run_logged([*command, f"--output={out}", f"--python={python}"], log)
    found = re.search(r"expert success (\d+)/(\d+)", log.read_text())
    return out, int(found.group(1)) / int(found.group(2))


def run_lerobot(args: argparse.Namespace, demos: Path, root: Path, python: Path) -> dict:
    out = root / "lerobot.json"
    command = [str(python), str(REPO / "benchmarks" / "lerobot_gym_hil_sac.py"), f"--dataset={demos}"]
    command += [f"--env-steps={args.env_steps}", f"--learning-starts={args.learning_starts}"]
    command += [f"--batch-size={args.batch_size}", f"--eval-episodes={args.eval_episodes}", f"--out={out}"]
    wall_s = run_logged(command, root / "lerobot.log", env=lerobot_env(root / "hf_home"))
    result = json.loads(out.read_text())
    result["run_wall_s"] = wall_s
    return result


def run_rlpd(args: argparse.Namespace, demos: Path, root: Path, python: Path) -> dict:
    run_dir = root / "rlpd"
    command = [*CLI, "train", *RLPD_OVERRIDES, f"demos.path={demos}", f"env.options.python={python}"]
    command += [f"total_env_steps={args.env_steps}", f"replay.learning_starts={args.learning_starts}"]
    command += [f"replay.batch_size={args.batch_size}", f"eval.interval_env_steps={args.env_steps}"]
    command += [f"eval.num_episodes={args.eval_episodes}", "max_minutes=600", f"run_dir={run_dir}"]
    wall_s = run_logged(command, root / "rlpd.log")
    evaluation = json.loads((run_dir / "eval" / f"eval_env_step_{args.env_steps:09d}.json").read_text())
    return {
        "learner": "vla_rl_rlpd",
        "env_steps": args.env_steps,
        "success_rate": evaluation["success_rate"],
        "eval_episodes": evaluation["num_episodes"],
        "run_wall_s": wall_s,
        "median_s_per_env_step": median_s_per_learning_step(run_dir),
    }


def median_s_per_learning_step(run_dir: Path) -> float | None:
    """Median over the run's updates of (env step + update) seconds, from its logged timings: each
    update follows one env step of its one world, as each of LeRobot's learning steps does."""
    from benchmarks.rl_pick_place import logged_scalars

    scalars = logged_scalars(run_dir)
    rollout, update = scalars.get("perf/rollout_time_s", {}), scalars.get("perf/update_time_s", {})
    steps = sorted(set(rollout) & set(update))[1:]  # the first update pays for start-up
    return statistics.median(rollout[s] + update[s] for s in steps) if steps else None


def summarise(results: dict) -> str:
    lines = [
        f"Measured {results['machine']}; {results['env_steps']:,} env steps, "
        f"{results['demos']} demonstrations (expert success {100 * results['expert_success']:.0f} %), "
        f"{results['eval_episodes']} deterministic "
        "evaluation episodes.",
        "",
        "| learner | success | s per env step (run / env steps) | median s per learning env step |",
        "|---|---:|---:|---:|",
    ]
    for name, entry in (("LeRobot SAC", results["lerobot"]), ("vla-rl RLPD", results["rlpd"])):
        median = entry.get("median_s_per_env_step")
        per_step = entry["run_wall_s"] / results["env_steps"]
        lines.append(
            f"| {name} | {100 * entry['success_rate']:.1f} % | {per_step:.4f} | "
            f"{'n/a' if median is None else f'{median:.4f}'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-steps", type=int, default=20_000)
    parser.add_argument("--learning-starts", type=int, default=1_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--demos", type=int, default=20)
    parser.add_argument("--eval-episodes", type=int, default=32)
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/gym_hil_sac"))
    parser.add_argument("--quick", action="store_true", help="the whole pipeline at toy size")
    add_results_name(parser, "gym_hil_sac")
    args = parser.parse_args(argv)
    if args.quick:
        args.env_steps, args.learning_starts, args.batch_size = 150, 64, 32
        args.demos, args.eval_episodes = 2, 1
        if args.results_name == "gym_hil_sac":
            args.results_name = "gym_hil_sac_quick"
    python = lerobot_python()
    if python is None:
        raise SystemExit("needs .venv-lerobot (or LR_PYTHON): `make .venv-lerobot`")
    root = args.work_dir / args.results_name
    root.mkdir(parents=True, exist_ok=True)
    demos, expert_success = collect_demos(args.demos, root, python)
    results = {
        "machine": machine_line(),
        "env_steps": args.env_steps,
        "learning_starts": args.learning_starts,
        "batch_size": args.batch_size,
        "demos": args.demos,
        "expert_success": expert_success,
        "eval_episodes": args.eval_episodes,
        "rlpd_overrides": list(RLPD_OVERRIDES),
        "lerobot": run_lerobot(args, demos, root, python),
        "rlpd": run_rlpd(args, demos, root, python),
    }
    (RESULTS_DIR / f"{args.results_name}.json").write_text(json.dumps(results, indent=2) + "\n")
    print(summarise(results))


if __name__ == "__main__":
    main()
