"""Env-steps/s of every simulator backend, one row each, without a camera and with one 64x64 camera.

Each backend runs in the venv that holds it, so each call measures the backends importable here
and merges its rows into ``benchmarks/results/backends_table.json`` (keyed by backend):

    .venv/bin/python -m benchmarks.backends_table --backends mujoco mujoco_warp
    .venv-metaworld/bin/python -m benchmarks.backends_table --backends metaworld
    MUJOCO_GL=egl .venv-libero/bin/python -m benchmarks.backends_table --backends libero

Random actions after one reset, the median of ``--repeats`` stretches of ``--steps`` batched
steps (``benchmarks.render_speed.steps_per_s``), on the CPU. The batch differs where a backend's
worlds are expensive to build (LIBERO: 4 worlds in 2 worker processes); the table says which.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from benchmarks.common import machine_line
from benchmarks.render_speed import steps_per_s
from vla_rl.envs import EnvConfig

RESULTS = Path("benchmarks/results/backends_table.json")
BACKENDS: dict[str, tuple[EnvConfig, str]] = {
    "mujoco": (EnvConfig(backend="mujoco", task="push", num_envs=16, num_threads=2, image_size=64), "front"),
    "mujoco_warp": (
        EnvConfig(backend="mujoco_warp", task="push", num_envs=16, num_threads=2, image_size=64),
        "front",
    ),
    "metaworld": (
        EnvConfig(backend="metaworld", task="MT10", num_envs=16, image_size=64, max_episode_steps=500),
        "corner",
    ),
    "libero": (
        EnvConfig(
            backend="libero", task="libero_spatial/0+1+2+3", num_envs=4, image_size=64, options={"workers": 2}
        ),
        "agentview",
    ),
}
"""Each backend's env for the table and the camera of its camera row."""


def measure(backend: str, steps: int, repeats: int) -> dict:
    cfg, camera = BACKENDS[backend]
    blind = steps_per_s(dataclasses.replace(cfg, cameras=[]), steps, repeats)
    seeing = steps_per_s(dataclasses.replace(cfg, cameras=[camera]), steps, repeats)
    return {
        "task": cfg.task,
        "worlds": cfg.num_envs,
        "camera": camera,
        "no_camera": blind,
        "camera_64": seeing,
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_line(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", choices=sorted(BACKENDS), required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    table = json.loads(args.results.read_text()) if args.results.exists() else {}
    for backend in args.backends:
        table[backend] = measure(backend, args.steps, args.repeats)
        row = table[backend]
        print(
            f"{backend}: {row['worlds']} worlds of {row['task']}: {row['no_camera']:.1f} env-steps/s "
            f"without a camera, {row['camera_64']:.1f} with {row['camera']} 64x64"
        )
    args.results.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
