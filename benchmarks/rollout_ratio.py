"""Rollout / raw physics throughput on every MuJoCo task, each with its own default env config.

The rollout (simulation, controller, observations, rewards, resets and inference of the default
MLP actor-critic) is timed by the PPO collector, and each timed run is paired with a raw-physics
run (the faster of ``mujoco.rollout`` and ``mujoco.batch`` over the same worlds, same substeps,
both cores) measured right after it, so each ratio compares neighbours on a machine whose speed
drifts between minutes. Printed per task: worlds, milliseconds per control step of all worlds for
raw physics (arm moving) and for the rollout, and the median ratios over the pairs with the arm
held and moving.

    python -m benchmarks.rollout_ratio [--tasks reach push lift pick_place] [--num-envs N] [--repeats 5]
        [--hidden-sizes 256 256 128]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.common import machine_line
from benchmarks.throughput import raw_physics_steps_per_s
from vla_rl.config import compose_train_config
from vla_rl.config.schema import TrainConfig
from vla_rl.envs import make_env
from vla_rl.training.components import build_training_components

TARGET_RATIO = 0.60


def task_config(
    task: str,
    threads: int,
    num_envs: int | None,
    backend: str = "mujoco",
    device: str = "cpu",
    hidden_sizes: list[int] | None = None,
    compute: str | None = None,
) -> TrainConfig:
    """The default training config with the task's own env group (its world count and policy head
    widths unless given)."""
    overrides = [f"env={task}", f"env.num_threads={threads}", f"env.backend={backend}"]
    overrides += [f"env.device={device}", "seed=0"]
    if num_envs is not None:
        overrides.append(f"env.num_envs={num_envs}")
    if hidden_sizes is not None:
        overrides.append(f"policy.hidden_sizes=[{','.join(map(str, hidden_sizes))}]")
    if compute is not None:
        overrides.append(f"+env.options.compute={compute}")
    return compose_train_config(overrides)


def raw_rate(cfg: TrainConfig, moving: bool, per_control_step: bool = False) -> float:
    """Raw physics env-steps/s of the config's backend (one measurement): all control steps in one
    call, or with ``per_control_step`` one ``mujoco.batch`` call per control step (CPU only)."""
    if cfg.env.backend == "mujoco_warp":
        from benchmarks.warp_physics_reference import warp_physics_env_steps_per_s

        return warp_physics_env_steps_per_s(cfg.env, moving=moving)
    if per_control_step:
        from benchmarks.physics_reference import STEPWISE_ENGINE, physics_env_steps_per_s

        return physics_env_steps_per_s(cfg.env, moving=moving, engine=STEPWISE_ENGINE)
    return raw_physics_steps_per_s(cfg, 1, moving=moving)


def paired_rollout_rates(cfg: TrainConfig, collections: int, repeats: int) -> dict[str, list[float]]:
    """Per pair: rollout env-steps/s over ``collections`` collections, then raw physics held and
    moving, measured right after it (and, on the CPU backend, moving with one call per control
    step: what physics alone costs in a closed loop)."""
    env = make_env(cfg.env)
    collector = build_training_components(cfg, env).collector
    obs, _ = env.reset(seed=cfg.seed)
    obs, _ = collector.collect(obs)  # warm-up
    stepwise = cfg.env.backend == "mujoco"
    rates: dict[str, list[float]] = {"rollout": [], "held": [], "moving": [], "stepwise": []}
    for _ in range(repeats):
        steps, seconds = 0, 0.0
        for _ in range(collections):
            obs, stats = collector.collect(obs)
            steps += stats.env_steps
            seconds += stats.rollout_time_s
        rates["rollout"].append(steps / seconds)
        rates["held"].append(raw_rate(cfg, moving=False))
        rates["moving"].append(raw_rate(cfg, moving=True))
        if stepwise:
            rates["stepwise"].append(raw_rate(cfg, moving=True, per_control_step=True))
    env.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["reach", "push", "lift", "pick_place"])
    parser.add_argument(
        "--num-envs", type=int, default=None, help="worlds for every task (default: each task's own)"
    )
    parser.add_argument(
        "--hidden-sizes", type=int, nargs="+", default=None, help="MLP head widths (default: each task's own)"
    )
    parser.add_argument("--threads", type=int, default=2, help="simulation threads (cores)")
    parser.add_argument("--backend", default="mujoco", choices=["mujoco", "mujoco_warp"])
    parser.add_argument(
        "--compute",
        nargs="+",
        default=[None],
        choices=["device", "host"],
        help="mujoco_warp: where controllers, rewards and resets run (each given value is measured)",
    )
    parser.add_argument("--device", default="cpu", help="env and policy device (cuda for warp on a GPU)")
    parser.add_argument("--collections", type=int, default=3, help="rollouts per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs, each paired with raw physics")
    args = parser.parse_args()

    print(f"machine: {machine_line()}")
    print(f"backend {args.backend}, device {args.device}")
    print(
        f"{'task':<11} {'worlds':>6} {'MLP':>13} {'raw ms/step (moving)':>20} {'rollout ms/step':>15} "
        f"{'rollout / raw held':>18} {'rollout / raw moving':>20} {'(per control step)':>18}"
    )
    for task, compute in [(task, compute) for task in args.tasks for compute in args.compute]:
        cfg = task_config(
            task, args.threads, args.num_envs, args.backend, args.device, args.hidden_sizes, compute
        )
        torch.set_num_threads(cfg.torch_num_threads)
        rates = paired_rollout_rates(cfg, args.collections, args.repeats)
        held = [r / h for r, h in zip(rates["rollout"], rates["held"], strict=True)]
        moving = [r / m for r, m in zip(rates["rollout"], rates["moving"], strict=True)]
        closed_loop = [r / m for r, m in zip(rates["rollout"], rates["stepwise"], strict=False)]
        worlds = cfg.env.num_envs
        raw_ms = 1000 * worlds / statistics.median(rates["moving"])
        rollout_ms = 1000 * worlds / statistics.median(rates["rollout"])
        network = "-".join(map(str, cfg.policy.hidden_sizes or []))
        label = f"{task} ({compute})" if compute else task
        print(
            f"{label:<11} {worlds:>6} {network:>13} {raw_ms:>20.2f} {rollout_ms:>15.2f} "
            f"{statistics.median(held):>8.2f} ({min(held):.2f}-{max(held):.2f}) "
            f"{statistics.median(moving):>10.2f} ({min(moving):.2f}-{max(moving):.2f})"
            + (
                f" {statistics.median(closed_loop):>8.2f} ({min(closed_loop):.2f}-{max(closed_loop):.2f})"
                if closed_loop
                else ""
            ),
            flush=True,
        )
    print(f"target: rollout / raw physics >= {TARGET_RATIO:.2f}; medians over the pairs (range in brackets)")
    print("(per control step): against raw physics moving with one batch call per control step, as a")
    print("closed loop must call it; informative only, the target's yardstick is the faster one-call run")


if __name__ == "__main__":
    main()
