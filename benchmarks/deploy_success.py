"""Success over ROS against direct evaluation on the same seeds: the default ``reach`` recipe trained by
``vla-rl train``, then rehearsed over ROS 1 (``roscore``, ``vla-rl sim-robot``, ``vla-rl deploy``) with
the default (conservative) safety layer and with it off, side by side with direct evaluation in the
simulator (no transport, no safety layer). Runs inside a private network namespace when it can.

    python -m benchmarks.deploy_success [--episodes 50]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import NAMESPACE_FLAG, machine_line, rerun_in_private_namespace

OUT_DIR = Path("runs/bench/deploy_success")
RESULTS = Path("benchmarks/results/deploy_success.json")
SEED = 1000
TRAIN = ["env=reach", "total_env_steps=500000", "eval.video=false", "logger.tensorboard=false"]
"""The default training job (`make train`)."""


def train(run_dir: Path, overrides: list[str] = TRAIN) -> Path:
    """``vla-rl train`` with ``overrides`` into ``run_dir``, unless it holds checkpoints already."""
    if not (run_dir / "checkpoints").is_dir():
        command = [sys.executable, "-m", "vla_rl.cli", "train", *overrides, f"run_dir={run_dir}"]
        proc = subprocess.run(command, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"training failed:\n{proc.stderr[-3000:]}")
    return run_dir


def rehearsed(run: Path, direct: list[bool], extra: list[str], work_dir: Path) -> dict:
    """A rehearsal over ROS 1 of ``run`` on the seeds of ``direct`` (its outcomes in the simulator),
    with the deploy overrides ``extra``, as ``rehearsal_row``."""
    from vla_rl.real_world.rehearsal import run_rehearsal

    shutil.rmtree(work_dir, ignore_errors=True)
    overrides = [f"checkpoint={run}", f"episodes={len(direct)}", f"seed={SEED}", *extra]
    return rehearsal_row(run_rehearsal(overrides, work_dir), direct)


def rehearsal_row(rehearsal: dict, direct: list[bool]) -> dict:
    """Success, agreement with ``direct`` per seed, latencies, safety events, and the periods whose
    images missed the joint state's sync slop (no command from them) or that the safety layer held."""
    per_episode = rehearsal["deploy"]["per_episode"]
    over_ros = [bool(e["success"]) for e in per_episode]
    latency_ms = np.asarray(rehearsal["sim"]["latencies_s"]) * 1e3
    return {
        "success_rate": float(np.mean(over_ros)),
        "same_outcome_as_direct": int(sum(a == b for a, b in zip(over_ros, direct, strict=True))),
        "latency_p50_ms": float(np.percentile(latency_ms, 50)),
        "latency_p99_ms": float(np.percentile(latency_ms, 99)),
        "safety_counts": {k: v for k, v in rehearsal["deploy"]["safety_counts"].items() if v},
        "periods": int(sum(e["steps"] for e in per_episode)),
        "unsynced_periods": int(sum(e["unsynced_steps"] for e in per_episode)),
        "held_periods": int(sum(e["held_steps"] for e in per_episode)),
    }


def run_all(episodes: int) -> dict:
    from vla_rl.real_world.policy_runner import load_trained_policy
    from vla_rl.real_world.sim_eval import evaluate_on_seeds

    run = train(OUT_DIR / "reach")
    direct = evaluate_on_seeds(load_trained_policy(run), [SEED + i for i in range(episodes)])
    results = {"direct (simulator, no safety layer)": {"success_rate": float(np.mean(direct))}}
    for name, extra in {"ROS 1, default safety": [], "ROS 1, safety off": ["safety.enabled=false"]}.items():
        work_dir = OUT_DIR / name.replace(" ", "_").replace(",", "")
        results[name] = rehearsed(run, direct, extra, work_dir)
        print(name, json.dumps(results[name]), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument(NAMESPACE_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rerun_in_private_namespace("benchmarks.deploy_success")
    results = run_all(args.episodes)
    last_seed = SEED + args.episodes - 1
    print(f"\nmachine: {machine_line()}; {args.episodes} reach episodes, seeds {SEED}..{last_seed}")
    direct = results["direct (simulator, no safety layer)"]["success_rate"]
    for name, row in results.items():
        gap = 100 * (row["success_rate"] - direct)
        print(f"{name:<38} success {100 * row['success_rate']:5.1f} %  ({gap:+.1f} points vs direct)")
    RESULTS.write_text(
        json.dumps({"machine": machine_line(), "episodes": args.episodes, "results": results}, indent=2)
    )


if __name__ == "__main__":
    main()
