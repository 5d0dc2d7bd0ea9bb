"""Camera observations: env-steps/s with and without a 64x64 camera, shadows and multisampling.

Rendering usually dominates the cost of pixel-based training on a CPU (EGL on llvmpipe), so this
prints how much each rendering feature costs per frame.

    python -m benchmarks.render_speed [--num-envs 64] [--steps 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch

from benchmarks.common import machine_line
from vla_rl.envs import EnvConfig, make_env

VARIANTS = {
    "state only": {"cameras": []},
    "front 64x64": {"cameras": ["front"]},
    "front 64x64 + shadows": {"cameras": ["front"], "shadows": True},
    "front 64x64 + multisample": {"cameras": ["front"], "multisample": True},
}


def steps_per_s(cfg: EnvConfig, steps: int, repeats: int) -> float:
    env = make_env(cfg)
    env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    actions = torch.rand((steps, env.num_envs, env.action_dim), generator=generator) * 2 - 1
    env.step(actions[0])
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for action in actions:
            env.step(action)
        rates.append(steps * env.num_envs / (time.perf_counter() - start))
    env.close()
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reach")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    base = EnvConfig(task=args.task, num_envs=args.num_envs, image_size=64)
    print(f"machine: {machine_line()}")
    print(f"task {args.task}, {args.num_envs} worlds, {base.num_threads} threads")
    state_rate = None
    for name, changes in VARIANTS.items():
        rate = steps_per_s(dataclasses.replace(base, **changes), args.steps, args.repeats)
        state_rate = state_rate or rate
        extra_ms = 1000.0 * (1.0 / rate - 1.0 / state_rate) * base.num_threads
        print(f"{name:<28} {rate:>9,.0f} env-steps/s   render cost {extra_ms:6.2f} ms/frame/core")


if __name__ == "__main__":
    main()
