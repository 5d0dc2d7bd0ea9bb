"""Seconds per update and env-steps/s of the pi0 Flow-SDE PPO recipe on ``pick_place``, on a GPU
(MuJoCo Warp, all worlds and the policy on the device) or on the CPU (the ``mujoco`` backend).

The committed pi0 start ``benchmarks/starts/pi0_200_start5`` is fine-tuned by ``vla-rl train
recipe=pi0_flow_sde_ppo`` for ``--updates`` updates with ``--num-envs`` worlds (front camera, as
the start reads it); the collocated placement (one process: env, inference and update on one
device). From the run's logged timings, the first update left out (it holds compilation and
CUDA-graph capture): the median seconds of collection, of the update and of both, and env-steps/s
(control steps of all worlds per second of collection and update). Written to
``benchmarks/results/chunk_rl_speed_<device>.json``.

    python -m benchmarks.chunk_rl_speed --device cuda --num-envs 256   # the GPU row
    python -m benchmarks.chunk_rl_speed --device cpu --num-envs 16     # the CPU row
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks.common import RESULTS_DIR, machine_line, run_logged
from benchmarks.rl_pick_place import logged_scalars

START = Path(__file__).parent / "starts" / "pi0_200_start5"
CLI = (sys.executable, "-m", "vla_rl.cli")


def train_command(args: argparse.Namespace, run_dir: Path) -> list[str]:
    backend = "mujoco_warp" if args.device.startswith("cuda") else "mujoco"
    command = [*CLI, "train", "recipe=pi0_flow_sde_ppo", f"policy.init_from={START}", "env=pick_place"]
    command += ["env.cameras=[front]", f"env.backend={backend}", f"env.device={args.device}"]
    command += [f"device={args.device}", f"env.num_envs={args.num_envs}", f"iterations={args.updates}"]
    command += ["eval.num_episodes=0", "logger.wandb_mode=disabled", "logger.progress_bar=false", "seed=0"]
    return [*command, f"max_minutes={args.max_minutes}", f"run_dir={run_dir}"]


def summarise_run(run_dir: Path) -> dict[str, float]:
    scalars = logged_scalars(run_dir)
    rollout, update, steps = (
        scalars["perf/rollout_time_s"],
        scalars["train/update_time_s"],
        scalars["rollout/env_steps"],
    )
    keys = sorted(rollout)[1:] or sorted(rollout)
    return {
        "updates_timed": len(keys),
        "median_rollout_s": statistics.median(rollout[k] for k in keys),
        "median_update_s": statistics.median(update[k] for k in keys),
        "median_seconds_per_update": statistics.median(rollout[k] + update[k] for k in keys),
        "median_env_steps_per_s": statistics.median(steps[k] / (rollout[k] + update[k]) for k in keys),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--max-minutes", type=float, default=6.0, help="wall-clock cap")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/chunk_rl_speed"))
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    run_dir = args.work_dir / f"{args.device.split(':')[0]}_{args.num_envs}"
    wall_s = run_logged(train_command(args, run_dir), args.work_dir / f"{run_dir.name}.log")
    row = {"machine": machine_line(), "device": args.device, "num_envs": args.num_envs, "wall_s": wall_s}
    row.update(summarise_run(run_dir))
    print(
        f"{args.device}, {args.num_envs} worlds: {row['median_seconds_per_update']:.2f} s per update "
        f"(collection {row['median_rollout_s']:.2f} s, update {row['median_update_s']:.2f} s), "
        f"{row['median_env_steps_per_s']:,.0f} env-steps/s",
        flush=True,
    )
    out = RESULTS_DIR / f"chunk_rl_speed_{args.device.split(':')[0]}.json"
    out.write_text(json.dumps(row, indent=2) + "\n")


if __name__ == "__main__":
    main()
