"""PPO end to end on MuJoCo Warp with the whole rollout on the GPU: env-steps/s and time to success.

For each task, ``vla-rl train`` of the default PPO recipe on ``mujoco_warp`` with ``--num-envs``
worlds on ``--device``, everything above the physics on the device (``env.options.compute``),
for ``--env-steps`` env steps (a budget in env steps; ``--max-minutes`` is only a cap). Printed and
written to ``benchmarks/results/warp_ppo_<device>.json``: the median env-steps/s over the updates
(rollout and update, the first update left out: it holds CUDA-graph capture and compilation), the
final evaluation's success and the run's wall-clock.

    python -m benchmarks.warp_ppo [--tasks reach push] [--num-envs 4096] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks.common import RESULTS_DIR, machine_line, run_logged
from benchmarks.rl_pick_place import logged_scalars

CLI = (sys.executable, "-m", "vla_rl.cli")


def train_command(task: str, args: argparse.Namespace, run_dir: Path) -> list[str]:
    command = [*CLI, "train", f"env={task}", "env.backend=mujoco_warp", f"env.device={args.device}"]
    command += [f"env.num_envs={args.num_envs}", f"+env.options.compute={args.compute}"]
    command += [f"total_env_steps={args.env_steps}", f"max_minutes={args.max_minutes}", "seed=0"]
    command += ["eval.video=false", "logger.wandb_mode=disabled", "logger.progress_bar=false"]
    return [*command, f"eval.num_envs={args.num_envs}", f"run_dir={run_dir}"]


def summarise_run(run_dir: Path, wall_s: float) -> dict[str, float]:
    scalars = logged_scalars(run_dir)
    rates = scalars["perf/iteration_env_steps_per_s"]
    steady = [rates[k] for k in sorted(rates)[1:]] or list(rates.values())
    evaluations = scalars.get("eval/success_rate", {})
    return {
        "env_steps": max(scalars["rollout/env_steps"]) if "rollout/env_steps" in scalars else float("nan"),
        "median_env_steps_per_s": statistics.median(steady),
        "final_eval_success": evaluations[max(evaluations)] if evaluations else float("nan"),
        "wall_s": wall_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["reach", "push"])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compute", default="device", choices=["device", "host"])
    parser.add_argument("--env-steps", type=int, default=4_096_000, help="env steps per task")
    parser.add_argument("--max-minutes", type=float, default=4.0, help="wall-clock cap per task")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/warp_ppo"))
    args = parser.parse_args()
    args.work_dir.mkdir(parents=True, exist_ok=True)
    results = {"machine": machine_line(), "num_envs": args.num_envs, "compute": args.compute, "tasks": {}}
    for task in args.tasks:
        run_dir = args.work_dir / f"{task}_{args.device}_{args.compute}"
        wall_s = run_logged(train_command(task, args, run_dir), args.work_dir / f"{run_dir.name}.log")
        results["tasks"][task] = row = summarise_run(run_dir, wall_s)
        print(
            f"{task}: {row['median_env_steps_per_s']:,.0f} env-steps/s (median over updates), "
            f"final evaluation {100 * row['final_eval_success']:.1f} %, {row['wall_s']:.0f} s wall-clock",
            flush=True,
        )
    out = RESULTS_DIR / f"warp_ppo_{args.device.split(':')[0]}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
