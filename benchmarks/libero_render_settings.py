"""What LIBERO's rendering costs on this machine, and what each cheaper setting saves and changes.

One world of ``libero_spatial/0`` stepped with a no-op action, one process, after a reset and
``--warmup`` untimed steps, under four render settings of its offscreen context (two cameras,
agent view and wrist, ``--image-size`` pixels): LIBERO's own (multisampling as its model asks,
shadows and reflections on), multisampling off (``model.vis.quality.offsamples = 0``), shadows and
reflections off (MuJoCo's ``mjRND_SHADOW`` / ``mjRND_REFLECTION`` scene flags), and both; plus the
same world with no camera. Each row: median env-steps/s over ``--repeats`` timed blocks of
``--steps`` steps and how far the frames move from LIBERO's own look (mean absolute difference,
0-255, over both cameras, same simulation state). Runs in ``.venv-libero``:

    MUJOCO_GL=egl .venv-libero/bin/python -m benchmarks.libero_render_settings \\
        [--out benchmarks/results/libero_render_settings.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from vla_rl.sims.libero.tasks import resolve_assets_dir
from vla_rl.sims.libero.worker import NOOP_ACTION, LiberoWorld, WorkerSpec, open_libero_worlds

from benchmarks.common import machine_line

CAMERAS = ("agentview", "robot0_eye_in_hand")
SETTINGS = {
    "LIBERO's own": {"msaa": True, "shadows": True},
    "multisampling off": {"msaa": False, "shadows": True},
    "shadows and reflections off": {"msaa": True, "shadows": False},
    "both off": {"msaa": False, "shadows": False},
}


def open_world(cameras: tuple[str, ...], image_size: int, config_dir: str) -> LiberoWorld:
    spec = WorkerSpec(
        "libero_spatial", (0,), cameras, image_size, 0, "upright", str(resolve_assets_dir(None)), config_dir
    )
    return open_libero_worlds(spec)[0]


def apply(world: LiberoWorld, msaa: bool, shadows: bool, default_samples: int) -> None:
    """Set the world's offscreen context to ``msaa`` / ``shadows`` (rebuilding it for the samples)."""
    import mujoco

    context = world.env.sim._render_context_offscreen
    context.gl_ctx.make_current()
    samples = default_samples if msaa else 0
    if context.model.vis.quality.offsamples != samples:
        context.model.vis.quality.offsamples = samples
        context.con.free()
        context._set_mujoco_context_and_buffers()
    for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
        context.scn.flags[flag] = int(shadows)


def steps_per_s(world: LiberoWorld, steps: int, repeats: int) -> float:
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            world.step(NOOP_ACTION)
        rates.append(steps / (time.perf_counter() - start))
    return statistics.median(rates)


def frames(world: LiberoWorld) -> np.ndarray:
    """Both cameras' frames of the reset state (reset to initial state 0 first)."""
    obs = world.reset(0, 0)
    return np.stack([obs[f"rgb_{camera}"] for camera in CAMERAS]).astype(np.float64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=5, help="timed blocks per setting")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as config_dir:
        world = open_world(CAMERAS, args.image_size, config_dir)
        default_samples = world.env.sim.model.vis.quality.offsamples
        reference = None
        for name, setting in SETTINGS.items():
            apply(world, **setting, default_samples=default_samples)
            look = frames(world)
            reference = look if reference is None else reference
            for _ in range(args.warmup):
                world.step(NOOP_ACTION)
            rate = steps_per_s(world, args.steps, args.repeats)
            rows.append(
                {
                    "setting": name,
                    "env_steps_per_s": rate,
                    "look_change": float(np.abs(look - reference).mean()),
                }
            )
        world.close()
        blind = open_world((), args.image_size, config_dir)
        blind.reset(0, 0)
        rows.append(
            {
                "setting": "no camera",
                "env_steps_per_s": steps_per_s(blind, args.steps, args.repeats),
                "look_change": None,
            }
        )
        blind.close()
    lines = [
        f"| setting ({len(CAMERAS)} cameras, {args.image_size} px) | env-steps/s | look change (0-255) |",
        "|---|---:|---:|",
    ]
    for row in rows:
        change = "-" if row["look_change"] is None else f"{row['look_change']:.1f}"
        lines.append(f"| {row['setting']} | {row['env_steps_per_s']:.1f} | {change} |")
    print("\n".join(lines))
    print(machine_line(), f"MSAA samples of LIBERO's model: {default_samples}")
    if args.out is not None:
        record = {"date": time.strftime("%Y-%m-%d"), "machine": machine_line(),
                  "msaa_samples": int(default_samples), "settings": vars(args) | {"out": str(args.out)},
                  "rows": rows}  # fmt: skip
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
