"""CPU MuJoCo and MuJoCo Warp (CPU device) side by side: env-steps/s at several batch sizes,
with and without a 64x64 camera.

Both backends run the same task, controller and observation code; only the physics, kinematics
and rendering differ (per-world C calls in a thread pool with OpenGL on llvmpipe, versus batched
warp kernels and warp's ray tracer). On the CPU warp launches each kernel once for all worlds, so
its cost grows slowly with the batch; on a GPU the same launches are captured as CUDA graphs.
Each figure is the median of ``--repeats`` timed runs of ``--steps`` control steps with random
actions, after one warm-up step (warp compiles its kernels once per machine, cached afterwards).

    python -m benchmarks.backend_speed [--task push] [--num-envs 16 64 256] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import machine_line
from benchmarks.render_speed import steps_per_s
from vla_rl.envs import EnvConfig

BACKENDS = ("mujoco", "mujoco_warp")
RESULTS = Path("benchmarks/results/backend_speed.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="push")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="CPU backend worker threads")
    parser.add_argument("--no-camera", action="store_true", help="only the rows without a camera")
    parser.add_argument("--warp-device", default="cpu", help="warp device: cpu, or cuda on a GPU")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the JSON summary goes")
    args = parser.parse_args()
    print(machine_line())
    print(f"warp device {args.warp_device}, CPU backend on {args.threads} threads")
    print(f"task {args.task}, env-steps/s (median of {args.repeats} x {args.steps} control steps)")
    print(f"{'worlds':>7} {'camera':>12} {'mujoco':>10} {'mujoco_warp':>12} {'warp/cpu':>9}")
    rows = []
    for cameras in ([],) if args.no_camera else ([], ["front"]):
        for num_envs in args.num_envs:
            rates = {}
            for backend in BACKENDS:
                cfg = EnvConfig(
                    backend=backend,
                    task=args.task,
                    num_envs=num_envs,
                    cameras=cameras,
                    image_size=64,
                    num_threads=args.threads,
                    device=args.warp_device if backend == "mujoco_warp" else "cpu",
                )
                rates[backend] = steps_per_s(cfg, args.steps, args.repeats)
            ratio = rates["mujoco_warp"] / rates["mujoco"]
            label = "front 64x64" if cameras else "none"
            cpu_rate, warp_rate = rates["mujoco"], rates["mujoco_warp"]
            print(f"{num_envs:>7} {label:>12} {cpu_rate:>10.0f} {warp_rate:>12.0f} {ratio:>9.2f}")
            rows.append({"num_envs": num_envs, "camera": label, **rates, "warp_over_cpu": ratio})
    args.results.parent.mkdir(parents=True, exist_ok=True)
    summary = {"machine": machine_line(), "task": args.task, "warp_device": args.warp_device, "rows": rows}
    args.results.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
