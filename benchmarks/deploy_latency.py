"""Observation-to-command latency over ROS 1 on loopback with a small VLA, at 10 and 30 Hz, with and
without the asynchronous action queue, side by side in one run.

Each configuration is a full rehearsal (``roscore``, ``vla-rl sim-robot``, ``vla-rl deploy``) of a
tiny token VLA (two-layer PaliGemma-style model built from a config, random weights, chunks of 8
actions, 64x64 front camera and proprioception) on ``reach``. The latency is what the simulated
robot measures: from the stamp of the joint state it published to the arrival of the command
computed from (or dispatched for) it. Blocking mode runs the VLA once per period; queue mode fetches
chunks in a background thread and dispatches the queued action at once. Runs inside a private
network namespace (``unshare -n``) when it can, as the tests do.

    python -m benchmarks.deploy_latency [--episodes 4]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np

from benchmarks.common import NAMESPACE_FLAG, machine_line, rerun_in_private_namespace

OUT_DIR = Path("runs/bench/deploy_latency")
RESULTS = Path("benchmarks/results/deploy_latency.json")
RATES_HZ = (10.0, 30.0)
CHUNK_LEN = 8
REFILL_THRESHOLD = 4
"""Ask for the next chunk when fewer than 4 queued actions are left (more than one inference ahead)."""


def build_vla_checkpoint(run_dir: Path) -> Path:
    import torch
    from vla_rl.real_world.policy_runner import save_chunk_policy_checkpoint

    from vla_rl.envs.config import EnvConfig
    from vla_rl.policies.registry import build_chunk_policy

    torch.manual_seed(0)
    policy = build_chunk_policy(
        "token_vla", chunk_len=CHUNK_LEN, action_dim=4, use_proprio=True, proprio_dim=24
    )
    env = EnvConfig(task="reach", cameras=["front"], image_size=64)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    save_chunk_policy_checkpoint(policy, "token_vla", env, run_dir)
    return run_dir


def configurations(checkpoint: Path, episodes: int) -> dict[str, list[str]]:
    base = [f"checkpoint={checkpoint}", f"episodes={episodes}", "safety.enabled=true"]
    configs = {}
    for rate in RATES_HZ:
        configs[f"{rate:g} Hz, blocking"] = [*base, f"control_hz={rate}"]
        configs[f"{rate:g} Hz, queue"] = [
            *base,
            f"control_hz={rate}",
            "action_queue.enabled=true",
            f"action_queue.refill_threshold={REFILL_THRESHOLD}",
        ]
    return configs


def summarise(rehearsal: dict) -> dict:
    latency_ms = np.asarray(rehearsal["sim"]["latencies_s"]) * 1e3
    episodes = rehearsal["deploy"]["per_episode"]
    periods = sum(e["steps"] for e in episodes)
    return {
        "commands": int(len(latency_ms)),
        "periods": periods,
        "p50_ms": float(np.percentile(latency_ms, 50)),
        "p99_ms": float(np.percentile(latency_ms, 99)),
        "max_ms": float(latency_ms.max()),
        "periods_without_policy_action": sum(e["policy_failures"] for e in episodes),
        "held_periods": sum(e["held_steps"] for e in episodes),
        "dropped_commands": rehearsal["sim"]["dropped_commands"],
    }


def run_all(episodes: int) -> dict:
    from vla_rl.real_world.rehearsal import run_rehearsal

    checkpoint = build_vla_checkpoint(OUT_DIR / "token_vla")
    results = {}
    for name, overrides in configurations(checkpoint, episodes).items():
        work_dir = OUT_DIR / name.replace(" ", "_").replace(",", "")
        shutil.rmtree(work_dir, ignore_errors=True)
        results[name] = summarise(run_rehearsal(overrides, work_dir))
        print(name, json.dumps(results[name]), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument(NAMESPACE_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rerun_in_private_namespace("benchmarks.deploy_latency")
    results = run_all(args.episodes)
    print(f"\nmachine: {machine_line()}; reach episodes of 50 periods, {args.episodes} per configuration")
    print(f"{'configuration':<20} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'no action':>10} {'held':>6}")
    for name, row in results.items():
        print(
            f"{name:<20} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} {row['max_ms']:>8.2f} "
            f"{row['periods_without_policy_action']:>10} {row['held_periods']:>6}"
        )
    RESULTS.write_text(
        json.dumps({"machine": machine_line(), "episodes": args.episodes, "results": results}, indent=2)
    )


if __name__ == "__main__":
    main()
