"""A pixel policy trained on 64x64 renders, deployed with a camera of more pixels: does the robot side's
resize (``robot.sim_image_size``, PIL bilinear) keep its success? The ``reach_pixels`` recipe of the
learning benchmark is trained once, then evaluated on the same seeds directly in the simulator (cameras
at 64 pixels, and at each larger size with every frame resized before the policy reads it, in lockstep:
``evaluate_on_seeds``'s ``sim_image_size``) and rehearsed over ROS 1 (``roscore``, ``vla-rl
sim-robot``, ``vla-rl deploy``) at each size, the frames raw and jpeg-compressed. A wider camera
(``--wide``, ``robot.sim_image_width``: the view widened at the sides) is evaluated with the crop of
its square centre (``robot.image_crops``) and, directly, resized whole without one. Runs inside a
private network namespace when it can.

    python -m benchmarks.deploy_camera_size [--episodes 50] [--sizes 160 480] [--transports raw compressed]
    python -m benchmarks.deploy_camera_size --wide-only   # the wide-camera rows alone
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import NAMESPACE_FLAG, machine_line, rerun_in_private_namespace
from benchmarks.deploy_success import SEED, rehearsed, train

if TYPE_CHECKING:
    from vla_rl.real_world.policy_runner import LoadedPolicy

OUT_DIR = Path("runs/bench/deploy_camera_size")
RESULTS = Path("benchmarks/results/deploy_camera_size.json")
WIDE_RESULTS = Path("benchmarks/results/deploy_camera_size_wide.json")
TRAIN = [
    "env=reach_pixels",
    "policy=cnn",
    "algorithm=ppo_pixels",
    "torch_num_threads=2",
    "total_env_steps=614_400",
    "max_minutes=40",
    "eval.video=false",
    "logger.tensorboard=false",
]
"""The learning benchmark's ``reach_pixels`` job (``benchmarks.learning``), with a wall-clock cap that
the 600 updates must finish inside (``trained``)."""
UPDATES = 600
"""614,400 env steps of 32 worlds x 32 steps."""


def trained(run_dir: Path) -> Path:
    """The ``reach_pixels`` policy of ``TRAIN``, refused if the cap stopped it before ``UPDATES``."""
    run = train(run_dir, TRAIN)
    if not (run / "checkpoints" / f"iter_{UPDATES:06d}").is_dir():
        raise RuntimeError(f"{run} stopped before update {UPDATES} (max_minutes): not the declared policy")
    return run


def as_trained(episodes: int) -> tuple[Path, LoadedPolicy, list[bool]]:
    """The declared policy's run folder, the policy, and its outcomes on the seeds at 64 px."""
    from vla_rl.real_world.policy_runner import load_trained_policy
    from vla_rl.real_world.sim_eval import evaluate_on_seeds

    run = trained(OUT_DIR / "reach_pixels")
    loaded = load_trained_policy(run)
    return run, loaded, evaluate_on_seeds(loaded, [SEED + i for i in range(episodes)])


def run_all(episodes: int, sizes: list[int], transports: list[str], wide: tuple[int, int]) -> dict:
    run, loaded, direct = as_trained(episodes)
    results: dict[str, dict] = {"direct, 64 px (as trained)": {"success_rate": float(np.mean(direct))}}
    for px in sizes:
        results[f"direct, {px} px resized"] = directly(loaded, direct, sim_image_size=px)
    for transport in transports:
        for px in [0, *sizes]:
            name = f"ROS 1 {transport}, " + (f"{px} px resized" if px else "64 px")
            extra = [f"robot.sim_image_size={px}", f"robot.image_transport={transport}"]
            results[name] = rehearsed(run, direct, extra, OUT_DIR / f"ros1_{transport}_{px or 64}px")
            print(name, json.dumps(results[name]), flush=True)
    return results | wide_rows(run, loaded, direct, transports, *wide)


def directly(loaded: LoadedPolicy, direct: list[bool], **camera: Any) -> dict:
    """Lockstep evaluation on the seeds of ``direct`` with ``evaluate_on_seeds``'s camera settings."""
    from vla_rl.real_world.sim_eval import evaluate_on_seeds

    outcomes = evaluate_on_seeds(loaded, [SEED + i for i in range(len(direct))], **camera)
    agree = int(sum(a == b for a, b in zip(outcomes, direct, strict=True)))
    row = {"success_rate": float(np.mean(outcomes)), "same_outcome_as_direct": agree}
    print(f"direct {camera}", json.dumps(row), flush=True)
    return row


def wide_rows(
    run: Path, loaded: LoadedPolicy, direct: list[bool], transports: list[str], height: int, width: int
) -> dict:
    """A ``height`` x ``width`` camera on every camera of the policy: directly with the crop of the
    square centre, directly resized whole (the aspect squeezed), and over ROS 1 with the crop."""
    left = (width - height) // 2
    crops = {camera: [0, left, height, height] for camera in loaded.env.cameras}
    camera = {"sim_image_size": height, "sim_image_width": width}
    label = f"{height}x{width} px"
    results = {
        f"direct, {label}, centre crop": directly(loaded, direct, **camera, crops=crops),
        f"direct, {label}, resized whole": directly(loaded, direct, **camera),
    }
    extra = [f"robot.sim_image_size={height}", f"robot.sim_image_width={width}"]
    extra += [f"+robot.image_crops.{c}=[{','.join(map(str, crop))}]" for c, crop in crops.items()]
    for transport in transports:
        name = f"ROS 1 {transport}, {label}, centre crop"
        work_dir = OUT_DIR / f"ros1_{transport}_{height}x{width}px"
        results[name] = rehearsed(run, direct, [*extra, f"robot.image_transport={transport}"], work_dir)
        print(name, json.dumps(results[name]), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--sizes", type=int, nargs="+", default=[160, 480], help="camera pixels a side")
    parser.add_argument(
        "--transports", nargs="+", default=["raw", "compressed"], help="robot.image_transport"
    )
    parser.add_argument("--wide", type=int, nargs=2, default=[480, 640], metavar=("HEIGHT", "WIDTH"))
    parser.add_argument(
        "--wide-only", action="store_true", help=f"the wide-camera rows alone, to {WIDE_RESULTS}"
    )
    parser.add_argument(NAMESPACE_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rerun_in_private_namespace("benchmarks.deploy_camera_size")
    if args.wide_only:
        run, loaded, direct = as_trained(args.episodes)
        results = {"direct, 64 px (as trained)": {"success_rate": float(np.mean(direct))}}
        results |= wide_rows(run, loaded, direct, args.transports, *args.wide)
    else:
        results = run_all(args.episodes, args.sizes, args.transports, tuple(args.wide))
    print(f"\nmachine: {machine_line()}; {args.episodes} reach_pixels episodes, seeds {SEED}..")
    for name, row in results.items():
        print(f"{name:<44} success {100 * row['success_rate']:5.1f} %")
    report = {"machine": machine_line(), "episodes": args.episodes, "train": TRAIN, "results": results}
    (WIDE_RESULTS if args.wide_only else RESULTS).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
