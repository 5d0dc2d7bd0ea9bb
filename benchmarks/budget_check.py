"""Does ``max_minutes`` hold? Each committed RL recipe and the default job, run with a short cap.

Every committed recipe (``configs/recipe``) starts from its family's committed start under
``benchmarks/starts`` and the default job (``vla-rl train``, state PPO on ``reach``) from scratch,
each as a user runs it (``python -m vla_rl.cli train ... max_minutes=2``), one after the other. A job
passes when its whole process, imports, loading, training and evaluations included, ends within
``--limit-minutes`` (2.5 by default, for a 2-minute cap). Each job's first line of plan and its
output go to ``<run-root>/<job>.log``; the table to ``benchmarks/results/budget_check.json`` and
``.md``.

    python -m benchmarks.budget_check [--jobs default token_vla_ppo ...] [--minutes 2] [--limit-minutes 2.5]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line

STARTS_DIR = Path(__file__).parent / "starts"
RECIPE_STARTS = {
    "token_vla_ppo": "token_vla_400_start6",
    "token_vla_grpo": "token_vla_400_start6",
    "pi0_flow_sde": "pi0_200_start5",
    "pi0_flow_sde_ppo": "pi0_200_start5",
    "pi0_flow_noise": "pi0_200_start5",
    "pi0_flow_noise_ppo": "pi0_200_start5",
}
"""Every committed recipe and the committed start of its policy family."""
DEFAULT_JOB = "default"
"""The job ``vla-rl train`` runs without a recipe (``configs/train.yaml``)."""
JOBS = (DEFAULT_JOB, *RECIPE_STARTS)


def job_command(job: str, minutes: float, run_dir: Path, overrides: list[str]) -> list[str]:
    """The ``vla-rl train`` command line of ``job`` under a cap of ``minutes``."""
    command = [sys.executable, "-m", "vla_rl.cli", "train", f"max_minutes={minutes}", f"run_dir={run_dir}"]
    command.append("logger.wandb_mode=disabled")
    if job != DEFAULT_JOB:
        command += [f"recipe={job}", f"policy.init_from={STARTS_DIR / RECIPE_STARTS[job]}"]
    return [*command, *overrides]


def run_job(job: str, args: argparse.Namespace) -> dict:
    """Run ``job`` once and measure its whole process; its output goes to ``<run-root>/<job>.log``."""
    run_dir = args.run_root / job
    command = job_command(job, args.minutes, run_dir, args.overrides)
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall_min = (time.perf_counter() - start) / 60.0
    output = proc.stdout + proc.stderr
    args.run_root.mkdir(parents=True, exist_ok=True)
    (args.run_root / f"{job}.log").write_text(" ".join(command) + "\n\n" + output)
    return summarise(job, output, wall_min, proc.returncode, args.limit_minutes)


def summarise(job: str, output: str, wall_min: float, exit_code: int, limit_minutes: float) -> dict:
    """One row of the table from a job's output: its wall time against the limit, its plan line
    and how many updates it made."""
    plan = re.search(r"plan: .*", output)
    trained = re.search(r"trained (\d+) iterations", output)
    return {
        "job": job,
        "wall_min": round(wall_min, 3),
        "limit_min": limit_minutes,
        "within": exit_code in (0, 1) and wall_min <= limit_minutes,
        "exit_code": exit_code,
        "updates": int(trained.group(1)) if trained else None,
        "plan": plan.group(0) if plan else None,
    }


def markdown(rows: list[dict], machine: str, minutes: float) -> str:
    lines = [
        f"# `max_minutes={minutes:g}`: each job's wall time, evaluations included",
        "",
        f"Machine: {machine}. Made by `python -m benchmarks.budget_check`.",
        "",
        "| job | wall time (min) | limit (min) | within | updates | exit code |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        within = "yes" if row["within"] else "**no**"
        lines.append(
            f"| `{row['job']}` | {row['wall_min']:.2f} | {row['limit_min']:g} | {within} | "
            f"{row['updates'] if row['updates'] is not None else '-'} | {row['exit_code']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", nargs="+", choices=JOBS, default=list(JOBS), help="jobs to run, in order")
    parser.add_argument("--minutes", type=float, default=2.0, help="max_minutes given to every job")
    parser.add_argument("--limit-minutes", type=float, default=2.5, help="wall time a job must end within")
    parser.add_argument("--run-root", type=Path, default=Path("runs/bench/budget_check"))
    add_results_name(parser, "budget_check")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides added to every job")
    args = parser.parse_args(argv)
    machine = machine_line()
    print(f"machine: {machine}", flush=True)
    rows = []
    for job in args.jobs:
        row = run_job(job, args)
        rows.append(row)
        verdict = "within" if row["within"] else "OVER"
        print(f"{job:20s} {row['wall_min']:.2f} min (limit {args.limit_minutes:g})  {verdict}", flush=True)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stem = RESULTS_DIR / args.results_name
    stem.with_suffix(".json").write_text(
        json.dumps({"machine": machine, "max_minutes": args.minutes, "results": rows}, indent=1)
    )
    stem.with_suffix(".md").write_text(markdown(rows, machine, args.minutes))
    print(f"results: {stem.with_suffix('.json')} and .md")
    return 0 if all(row["within"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
