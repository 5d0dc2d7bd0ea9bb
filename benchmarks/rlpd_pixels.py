"""RLPD from pixels: ``push`` seen through the front and wrist cameras at 64x64, with 20 scripted
demonstrations (issue 86: at least 80 % success within 100,000 env steps).

1. ``vla-rl collect env=push env.cameras=[front,wrist] env.image_size=64 video.lossless=true`` records
   ``--demos`` expert episodes (lossless, so the frames the learner replays are the frames the env
   renders);
2. ``vla-rl train algorithm=rlpd observations=pixels demos.path=...`` with ``PIXEL_OVERRIDES`` for
   ``--env-steps``, evaluated every ``--eval-every`` env steps (64 deterministic episodes on the train
   split);
3. ``benchmarks/results/rlpd_pixels.json`` and the table ``rlpd_pixels.md``: the success of every
   evaluation, the env steps to 80 % and the wall-clock.

The learner differs from the state run of ``benchmarks.rlpd_vs_ppo`` only in what it sees: the same
4 worlds, 16 critic steps per batched env step, 2 LayerNorm critics and initial temperature 0.01,
plus the camera encoder (``policy.cnn_*``: DrQ's four 3x3 convolutions, trained by the critic loss)
and DrQ's random shift of 4 pixels. The actor and critics read ``rgb_front``, ``rgb_wrist`` and
``proprio``; nothing privileged.

``--quick`` runs the same two commands at toy size (16x16 images, a small encoder, 2 demonstrations of
20 steps, 96 env steps) into ``--work-dir``, to check the path; it measures nothing and writes nothing
under ``benchmarks/results``. ``--cost`` times a few updates and env steps of ``PIXEL_OVERRIDES`` in
this process (no learning) and writes ``results/rlpd_pixels_cost.{json,md}``.

Cost measured with ``--cost`` on 2026-12-06 (2-core AMD EPYC, avx2, torch on one thread, a 1-minute
load average of 4.4 from other runs beside it; ``results/rlpd_pixels_cost.md``): an update (16 critic
steps of 256 rows and one actor step, the cameras of 512 observations encoded per critic step) took
24 s, acting 4 env steps and drawing the 16 minibatches 0.4 s: 0.16 env steps/s, so 100,000 env steps
(25,000 updates) would take about 7 days on this CPU. The run is meant for a machine with a GPU
(``--device cuda``).

    python -m benchmarks.rlpd_pixels [--env-steps 100000] [--device cuda]
    python -m benchmarks.rlpd_pixels --quick --work-dir /tmp/rlpd_pixels_quick
    python -m benchmarks.rlpd_pixels --cost
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line, run_logged

TASK = "push"
TARGET_SUCCESS = 0.80
EVAL_EPISODES = 64
CAMERAS = ("env.cameras=[front,wrist]", "env.image_size=64")
PIXEL_OVERRIDES = (
    "algorithm=rlpd",
    "observations=pixels",
    "env.num_envs=4",
    "algorithm.num_critics=2",
    "algorithm.utd_ratio=16",
    "algorithm.init_alpha=0.01",
)
"""The learner: ``configs/observations/pixels.yaml`` (cameras, keys, the shift, a replay of 100,000)
and the RLPD settings of ``benchmarks.rlpd_vs_ppo``."""
QUICK_OVERRIDES = (
    "env.image_size=16",  # the first two also apply to the collection
    "env.max_episode_steps=20",
    "policy.cnn_channels=[8,8]",
    "policy.cnn_kernel_stride=[[3,2],[3,1]]",
    "policy.cnn_feature_dim=16",
    "policy.hidden_sizes=[32,32]",
    "replay.capacity=1000",
    "replay.batch_size=32",
    "replay.learning_starts=32",
    "algorithm.utd_ratio=2",
    "eval.num_episodes=4",
)
"""``--quick``: the same learner at toy size."""
CLI = (sys.executable, "-m", "vla_rl.cli")
QUIET = ("logger.wandb_mode=disabled",)

Curve = list[tuple[int, float]]
"""(env steps, success rate) of each evaluation, in order."""


def overridden(overrides: list[str], later: tuple[str, ...]) -> list[str]:
    """``overrides`` then ``later``, without the ones whose key ``later`` sets again."""
    keys = {override.partition("=")[0] for override in later}
    return [o for o in overrides if o.partition("=")[0] not in keys] + list(later)


def collect_demos(count: int, root: Path, quick: bool) -> Path:
    """``count`` expert episodes of ``push`` with both cameras under ``root``; their folder. Quick:
    20-step episodes at 16x16, kept whether or not they succeed."""
    out = root / "push_pixel_demos"
    command = [*CLI, "collect", f"env={TASK}", *CAMERAS, f"env.num_envs={count}", f"num_episodes={count}"]
    command += ["video.lossless=true", f"output_dir={out}"]
    if quick:
        command = overridden(command, QUICK_OVERRIDES[:2] + ("keep_failures=true",))
    run_logged(command, root / "collect.log")
    return out


def train_command(
    demos: Path, env_steps: int, eval_every: int, run_dir: Path, device: str, quick: bool
) -> list[str]:
    """The ``vla-rl train`` command of the RLPD run."""
    command = [*CLI, "train", f"env={TASK}", *PIXEL_OVERRIDES, f"demos.path={demos}", *QUIET]
    command += [f"total_env_steps={env_steps}", f"eval.interval_env_steps={eval_every}"]
    command += [f"eval.num_episodes={EVAL_EPISODES}", f"device={device}", "max_minutes=100000"]
    command.append(f"run_dir={run_dir}")
    return overridden(command, QUICK_OVERRIDES) if quick else command


def evaluation_curve(run_dir: Path) -> Curve:
    """(env steps, success) of every evaluation the run wrote."""
    curve = []
    for path in sorted((run_dir / "eval").glob("eval_env_step_*.json")):
        steps = int(path.stem.rsplit("_", 1)[1])
        curve.append((steps, json.loads(path.read_text())["success_rate"]))
    return curve


def steps_to(curve: Curve, target: float) -> int | None:
    """Env steps of the first evaluation at or above ``target``; None when none reached it."""
    return next((steps for steps, success in curve if success >= target), None)


def summarise(results: dict) -> str:
    """The markdown table of ``results`` (the JSON this benchmark writes)."""
    curve = [tuple(point) for point in results["curve"]]
    reached = steps_to(curve, TARGET_SUCCESS)
    verdict = "not reached" if reached is None else f"{reached:,}"
    lines = [
        f"Measured {results['machine']}, device {results['device']}.",
        "",
        f"RLPD from pixels on `{TASK}` ({results['demos']} demonstrations, {results['env_steps']:,} env "
        f"steps, {results['wall_s'] / 3600:.1f} h): env steps to {100 * TARGET_SUCCESS:.0f} %: {verdict}.",
        "",
        "| env steps | success |",
        "|---:|---:|",
    ]
    lines += [f"| {steps:,} | {100 * success:.1f} % |" for steps, success in curve]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict:
    """Collect, train, read the evaluations; the results (also written under ``--work-dir``)."""
    root = args.work_dir
    root.mkdir(parents=True, exist_ok=True)
    demos = collect_demos(args.demos, root, args.quick)
    run_dir = root / "rlpd_pixels"
    command = train_command(demos, args.env_steps, args.eval_every, run_dir, args.device, args.quick)
    wall_s = run_logged(command, root / "train.log")
    return {
        "machine": machine_line(),
        "device": args.device,
        "task": TASK,
        "demos": args.demos,
        "env_steps": args.env_steps,
        "command": command[len(CLI) :],
        "curve": evaluation_curve(run_dir),
        "wall_s": wall_s,
    }


# ----- --cost: seconds per update and env steps per second of PIXEL_OVERRIDES ---------------------------


def measure_cost(updates: int, device: str, work_dir: Path, threads: int = 1) -> dict:
    """Time ``updates`` updates of ``PIXEL_OVERRIDES`` (after one untimed) in this process, and what
    comes before each: the env steps taken with the policy and the ``utd_ratio`` minibatches drawn
    (from online data only: the demonstrations' share costs the same). ``threads`` is both torch's
    thread count and the env's."""
    import torch

    from vla_rl.training.jobs import job_config
    from vla_rl.training.off_policy.trainer import OffPolicyTrainer

    overrides = [*PIXEL_OVERRIDES, f"device={device}", "replay.capacity=2000", "replay.learning_starts=256"]
    overrides += [f"env.num_threads={threads}", f"torch_num_threads={threads}"]
    overrides += ["logger.progress_bar=false", "logger.tensorboard=false", *QUIET, f"run_dir={work_dir}"]
    cfg = job_config("off_policy", overrides)
    torch.set_num_threads(cfg.torch_num_threads)
    trainer = OffPolicyTrainer(cfg)
    source, algorithm = trainer.source, trainer.algorithm
    start = time.perf_counter()
    batches, _ = source.next_batch()  # the 256 random warm-up steps, untimed as acting
    warm_up_s = time.perf_counter() - start
    warm_up_steps = source.env_steps
    algorithm.update(batches)
    load_1min = os.getloadavg()[0]
    update_s, batch_s, steps = [], [], []
    for _ in range(updates):
        before, start = source.env_steps, time.perf_counter()
        batches, _ = source.next_batch()
        batch_s.append(time.perf_counter() - start)
        steps.append(source.env_steps - before)
        start = time.perf_counter()
        algorithm.update(batches)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        update_s.append(time.perf_counter() - start)
    seconds_per_update, seconds_per_batch = statistics.median(update_s), statistics.median(batch_s)
    env_steps_per_update = steps[0]
    return {
        "machine": machine_line(),
        "load_average_1min": load_1min,
        "device": device,
        "torch_threads": cfg.torch_num_threads,
        "overrides": list(PIXEL_OVERRIDES),
        "batch_size": cfg.replay.batch_size,
        "critic_steps_per_update": cfg.algorithm.utd_ratio,
        "env_steps_per_update": env_steps_per_update,
        "update_s": update_s,
        "seconds_per_update": seconds_per_update,
        "random_env_steps_per_s": warm_up_steps / warm_up_s,
        "batch_s": batch_s,
        "seconds_per_batch": seconds_per_batch,
        "training_env_steps_per_s": env_steps_per_update / (seconds_per_update + seconds_per_batch),
    }


def cost_note(cost: dict, env_steps: int = 100_000) -> str:
    """The markdown note of ``cost``, with what ``env_steps`` would take at that rate (evaluations not
    counted)."""
    hours = env_steps / cost["training_env_steps_per_s"] / 3600
    return "\n".join(
        [
            "# RLPD from pixels: the cost of an update (`python -m benchmarks.rlpd_pixels --cost "
            f"--cost-threads {cost['torch_threads']}`)",
            "",
            f"Measured {cost['machine']}; device {cost['device']}, torch on {cost['torch_threads']} "
            f"thread(s); 1-minute load average {cost['load_average_1min']:.2f} after the warm-up (on "
            "this 2-core machine, above about 2 means another job shared the cores).",
            "",
            f"Settings: `{' '.join(cost['overrides'])}` (64x64 front and wrist cameras, DrQ's encoder, "
            f"random shift 4 px), minibatches of {cost['batch_size']}.",
            "",
            "| quantity | value |",
            "|---|---:|",
            f"| seconds per update ({cost['critic_steps_per_update']} critic steps + 1 actor step) | "
            f"{cost['seconds_per_update']:.2f} |",
            f"| env steps per update | {cost['env_steps_per_update']} |",
            f"| env steps/s, random actions (both cameras) | {cost['random_env_steps_per_s']:.0f} |",
            f"| seconds to act {cost['env_steps_per_update']} env steps and draw "
            f"{cost['critic_steps_per_update']} minibatches | {cost['seconds_per_batch']:.2f} |",
            f"| env steps/s of training (acting + updates) | {cost['training_env_steps_per_s']:.3f} |",
            f"| {env_steps:,} env steps would take | {hours:.0f} h ({hours / 24:.1f} days) |",
            "",
            "Timed updates (s): " + ", ".join(f"{s:.2f}" for s in cost["update_s"]) + ".",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", type=int, default=20)
    parser.add_argument("--env-steps", type=int, default=100_000)
    parser.add_argument("--eval-every", type=int, default=10_000, help="env steps")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--work-dir", type=Path, default=Path("runs/bench/rlpd_pixels"))
    parser.add_argument("--quick", action="store_true", help="toy size, into --work-dir only")
    parser.add_argument("--cost", action="store_true", help="time a few updates, no learning")
    parser.add_argument("--cost-updates", type=int, default=3)
    parser.add_argument("--cost-threads", type=int, default=1, help="torch and env threads of --cost")
    parser.add_argument("--summarise", action="store_true", help="only rewrite the table from the JSON")
    add_results_name(parser, "rlpd_pixels")
    args = parser.parse_args(argv)
    json_path = RESULTS_DIR / f"{args.results_name}.json"
    if args.cost:
        cost = measure_cost(args.cost_updates, args.device, args.work_dir / "cost", args.cost_threads)
        (RESULTS_DIR / f"{args.results_name}_cost.json").write_text(json.dumps(cost, indent=2) + "\n")
        note = cost_note(cost)
        (RESULTS_DIR / f"{args.results_name}_cost.md").write_text(note + "\n")
        print(note)
        return
    if args.summarise:
        print(summarise(json.loads(json_path.read_text())))
        return
    if args.quick:
        args.demos, args.env_steps, args.eval_every = 2, 96, 48
        json_path = args.work_dir / f"{args.results_name}_quick.json"
    results = run(args)
    json_path.write_text(json.dumps(results, indent=2) + "\n")
    table = summarise(results)
    json_path.with_suffix(".md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
