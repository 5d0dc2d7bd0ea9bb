"""LIBERO env-steps per second with the worlds split over 1, 2 and 4 worker processes.

robosuite steps one world at a time in Python, so the backend spreads the worlds of a batch over
``env.options.workers`` processes. This measures the batched env as a trainer drives it (random
actions in [-1, 1], autoreset on) for each worker count, in ``.venv-libero``:

    .venv-libero/bin/python -m benchmarks.libero_speed [--suite libero_spatial] [--worlds 4]
        [--workers 1 2 4] [--steps 30] [--image-size 128] [--results benchmarks/results/libero_speed.json]

Each figure is the median of ``--repeats`` timed stretches of ``--steps`` batched steps after a
warm-up stretch of as many steps; building the worlds and the first reset are timed apart.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from benchmarks.common import machine_line, random_action_steps_per_s
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env


def measure(
    workers: int, worlds: int, steps: int, repeats: int, image_size: int, cameras: list[str], suite: str
) -> dict[str, float]:
    cfg = EnvConfig(
        backend="libero",
        task=suite,
        num_envs=worlds,
        cameras=cameras,
        image_size=image_size,
        options={"workers": workers},
    )
    start = time.perf_counter()
    env = make_env(cfg)
    built_s = time.perf_counter() - start
    try:
        start = time.perf_counter()
        env.reset(seed=0)
        reset_s = time.perf_counter() - start
        rate = random_action_steps_per_s(env, steps, repeats, warmup_steps=steps)
    finally:
        env.close()
    return {"env_steps_per_s": rate, "build_s": built_s, "first_reset_s": reset_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="libero_spatial", help="its tasks are spread over the worlds")
    parser.add_argument("--worlds", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--cameras", nargs="*", default=["agentview", "robot0_eye_in_hand"])
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    machine = machine_line()
    print(f"machine: {machine}", flush=True)
    rows = {}
    for workers in args.workers:
        row = measure(
            workers, args.worlds, args.steps, args.repeats, args.image_size, args.cameras, args.suite
        )
        rows[workers] = row
        print(f"workers {workers}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    for row in rows.values():
        row["ratio"] = row["env_steps_per_s"] / rows[args.workers[0]]["env_steps_per_s"]
    if args.results is not None:
        settings = {k: v for k, v in vars(args).items() if k != "results"}
        args.results.write_text(
            json.dumps({"machine": machine, "settings": settings, "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
