"""Camera observations: env-steps/s with and without a 64x64 camera, shadows and multisampling.

Rendering usually dominates the cost of pixel-based training on a CPU (EGL on llvmpipe), so this
prints how much each rendering feature costs per frame, and what rasterising each frame in the
env thread (``LP_NUM_THREADS=0``, the default set by ``vla_rl.sims``) gains over Mesa's own default
of one rasteriser thread per core (a second process, since Mesa reads the setting once).

    python -m benchmarks.render_speed [--num-envs 64] [--steps 50]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys

from benchmarks.common import machine_line, random_action_steps_per_s
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
    rate = random_action_steps_per_s(env, steps, repeats)
    env.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reach")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variant", choices=list(VARIANTS), help="measure only this one")
    parser.add_argument("--mesa-threads", type=int, help="set LP_NUM_THREADS (Mesa's rasteriser threads)")
    args = parser.parse_args()
    if args.mesa_threads is not None:
        os.environ["LP_NUM_THREADS"] = str(args.mesa_threads)
    base = EnvConfig(task=args.task, num_envs=args.num_envs, image_size=64)
    if args.variant:
        rate = steps_per_s(dataclasses.replace(base, **VARIANTS[args.variant]), args.steps, args.repeats)
        print(f"{args.variant}: {rate:.1f} env-steps/s")
        return
    print(f"machine: {machine_line()}")
    print(f"task {args.task}, {args.num_envs} worlds, {base.num_threads} threads")
    rates = {}
    for name, changes in VARIANTS.items():
        rates[name] = steps_per_s(dataclasses.replace(base, **changes), args.steps, args.repeats)
        extra_ms = 1000.0 * (1.0 / rates[name] - 1.0 / rates["state only"]) * base.num_threads
        print(f"{name:<28} {rates[name]:>9,.0f} env-steps/s   render cost {extra_ms:6.2f} ms/frame/core")
    cores = os.cpu_count() or 1
    mesa_default = _rate_in_subprocess(args, "front 64x64", cores)
    print(f"{'front 64x64, Mesa default':<28} {mesa_default:>9,.0f} env-steps/s   (LP_NUM_THREADS={cores})")
    ratio = rates["front 64x64"] / mesa_default
    print(f"ratio rendering in the env thread / Mesa default threads: {ratio:.2f}")


def _rate_in_subprocess(args: argparse.Namespace, variant: str, mesa_threads: int) -> float:
    command = [sys.executable, "-m", "benchmarks.render_speed", "--variant", variant]
    command += ["--mesa-threads", str(mesa_threads), "--task", args.task, "--num-envs", str(args.num_envs)]
    command += ["--steps", str(args.steps), "--repeats", str(args.repeats)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return float(re.search(r": ([0-9.]+) env-steps/s", output).group(1))


if __name__ == "__main__":
    main()
