"""SFT on ``pick_place``: in-distribution success vs. number of demonstrations, per VLA family.

1. ``vla-rl collect`` records the full demonstration budget with the scripted expert (successful
   episodes only, front camera 64x64, privileged state recorded), executing its actions with
   Gaussian noise (``noise_std``) so that the states cover recoveries; SFT learns the expert's
   clean action for each state (``data.action_key=expert_action``);
2. for each family (``token_vla``, ``chunk_vla``, ``pi0``) and each budget (the first K episodes),
   ``vla-rl sft`` trains a small model from scratch (the token VLAs' full budget in two stages,
   ``FULL_BUDGET_STAGES``) and evaluates it in the simulator on the training distribution
   (``env.split=train``, fresh initial states), sampling the model's own action distribution;
   the token VLAs' argmax is evaluated on the same episodes and reported beside it
   (``FAMILY_DECODINGS``);
3. the table is printed, written to ``benchmarks/results/sft_pick_place.json`` and plotted to
   ``benchmarks/results/sft_pick_place.png`` (``--results-name`` picks another stem).

Every model reads the front image, the instruction and a state vector of proprioception (without
the joint velocities, which let a model copy the motion instead of deciding it) plus
``obs["objects"]`` (the positions of the three cubes and three pads, in a fixed colour order): it
must read the instruction to know which cube to pick and which pad to place it on. The token VLAs
give each object its own prompt token and learn, as an auxiliary loss in training only, to predict
the privileged state (which cube and pad are named, the vectors to them) from the prompt feature of
their second decoder layer; pi0 learns the same from its action expert's state token at layer 2.
Each run goes through the CLI, the path a user takes; the SFT checkpoints are the starting points
for RL.

    python -m benchmarks.sft_pick_place [--families token_vla pi0] [--budgets 5 20 100 0]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line, results_files
from benchmarks.sft_plot import plot
from vla_rl.training.checkpoint import latest_checkpoint

SUCCESS_PATTERN = re.compile(r"evaluation \((\d+) episodes.*?success rate ([0-9.]+) %")
TARGET_SUCCESS = 0.80
"""In-distribution success required of each family with the full budget."""
CHECKPOINT_INTERVAL = 8000
"""A run that stops early resumes from its last checkpoint with ``vla-rl sft --resume``."""

COMMON = (
    "env=pick_place",
    "env.cameras=[front]",
    "env.image_size=64",
    "env.num_envs=32",
    "optim.warmup_steps=200",
    "optim.min_lr_ratio=0.05",
    "eval.interval=0",
    "logger.wandb_mode=disabled",
    "data.action_key=expert_action",
    "data.boundary_repeats=8",
    "policy.kwargs.action_dim=4",
    "policy.kwargs.proprio_dim=32",
    "+policy.kwargs.state_keys=[proprio,objects]",
    "+policy.kwargs.proprio_fields=[arm_qpos,gripper_opening_m,tcp_pos,tcp_rot6]",
)
"""State: 17 proprio values (joints, gripper, TCP pose) + 15 object coordinates (3 cubes x 3, 3
pads x 2); decision frames (episode start, after each gripper flip) 8 times per epoch."""

EXECUTE_STEPS = 2
"""Actions of each 4-step chunk executed before re-planning in the evaluation, fixed for all
families. ``benchmarks.sft_failure_stages`` measured whole chunks against re-planning after 2 at
26.6 vs 54.7 % for the token VLA and 59.4 vs 53.1 % for the chunk VLA (32,000-step checkpoints;
the chunk VLA reached 82.8 % with temporal ensembling), see benchmarks/results/sft_pick_place.md."""

TOKEN_VLA_RECIPE = (
    "+policy.kwargs.state_token_sizes=[17,3,3,3,2,2,2]",
    "+policy.kwargs.aux_target_key=privileged",
    "+policy.kwargs.aux_target_dim=26",
    "+policy.kwargs.aux_layer=2",
    "+policy.kwargs.backbone={num_layers:4}",
)
"""One prompt token per object; 4 decoder layers, the auxiliary privileged-state head on layer 2."""

FAMILY_OVERRIDES: dict[str, tuple[str, ...]] = {
    "token_vla": ("sft/policy=token_vla", *TOKEN_VLA_RECIPE),
    "chunk_vla": ("sft/policy=chunk_vla", *TOKEN_VLA_RECIPE),
    "pi0": (
        "sft/policy=pi0",
        "+policy.kwargs.num_layers=4",
        "+policy.kwargs.aux_target_key=privileged",
        "+policy.kwargs.aux_target_dim=26",
        "+policy.kwargs.aux_layer=2",
    ),
}


DECODINGS: dict[str, tuple[str, ...]] = {
    "sampled": ("eval.deterministic=false", "eval.temperature=1.0"),
    "argmax": ("eval.deterministic=true",),
    "ode": ("eval.deterministic=true",),
}
"""How an evaluation turns the model into actions: ``sampled`` draws each action token from the
model's bins at temperature 1; ``argmax`` takes each token's most likely bin; ``ode`` is pi0's
Euler ODE from Gaussian noise (a flow model's own way of sampling its distribution; its
``deterministic=false`` would add the RL exploration noise on top)."""

FAMILY_DECODINGS: dict[str, tuple[str, ...]] = {
    "token_vla": ("sampled", "argmax"),
    "chunk_vla": ("sampled", "argmax"),
    "pi0": ("ode",),
}
"""The first is the benchmark's criterion for the family: a sample of the model's own action
distribution, as each family defines it; the others are measured on the same episodes and reported
beside it."""

LEARNING_RATE = 3e-4
"""Peak learning rate (warm-up, then cosine decay to ``optim.min_lr_ratio`` of it) of a first stage."""


@dataclass(frozen=True)
class Stage:
    """One ``vla-rl sft`` run; a later stage starts from the previous stage's weights with a fresh
    optimizer and learning-rate schedule (a warm restart)."""

    steps: int
    learning_rate: float = LEARNING_RATE


FULL_BUDGET_STAGES: dict[str, tuple[Stage, ...]] = {
    "token_vla": (Stage(56000), Stage(32000, 1.5e-4)),
    "chunk_vla": (Stage(56000), Stage(32000, 1.5e-4)),
    "pi0": (Stage(32000),),
}
"""Optimizer steps (batch 64) with the full budget. Measured with re-planning after 2: pi0 67.2 %
after 16,000 and 93.8 % after 32,000 steps; the token VLAs' argmax 15.6 / 51.6 / 60.9 % (token_vla)
and 37.5 / 53.1 / 71.9 % (chunk_vla) after 16,000 / 32,000 / 56,000 steps in one run, still rising,
so they train 32,000 steps more from the 56,000-step weights at half the learning rate (argmax 70.3
and 70.3 %). Sampled, the criterion, the 56,000-step models already reached 87.5 and 85.9 %, the
88,000-step ones 89.1 and 82.8 %."""


def collect(dataset: Path, num_episodes: int, noise_std: float) -> None:
    if (dataset / "meta" / "info.json").is_file():
        print(f"demonstrations: reusing {dataset}", flush=True)
        return
    command = [
        sys.executable,
        "-m",
        "vla_rl.cli",
        "collect",
        "env=pick_place",
        f"num_episodes={num_episodes}",
        f"output_dir={dataset}",
        f"noise_std={noise_std}",
        "seed=12345",
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    minutes = (time.perf_counter() - start) / 60
    print(f"demonstrations: {num_episodes} episodes in {minutes:.1f} min", flush=True)


def stage_dir(run_root: Path, family: str, budget: int, stages: tuple[Stage, ...], index: int) -> Path:
    """``<family>_<budget>`` for the first stage, ``<family>_<budget>_<total steps>k`` after it."""
    name = f"{family}_{budget or 'full'}"
    if index > 0:
        name += f"_{sum(stage.steps for stage in stages[: index + 1]) // 1000}k"
    return run_root / name


def run_stage(
    family: str,
    budget: int,
    stage: Stage,
    run_dir: Path,
    init_from: Path | None,
    decoding: str | None,
    dataset: Path,
    args: argparse.Namespace,
    evaluate_only: bool = False,
) -> dict[str, object]:
    """Train one stage (or resume it where it stopped) and evaluate it with ``decoding`` (None:
    no evaluation); returns its wall time and the success rate. A finished stage trains nothing:
    it evaluates again, or is skipped where it is not evaluated. ``evaluate_only`` evaluates the
    stage's last checkpoint even under ``--retrain`` (a second decoding of a stage just trained)."""
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    evaluation = [
        f"eval.num_episodes={args.eval_episodes if decoding else 0}",
        f"eval.execute_steps={EXECUTE_STEPS}",
        *DECODINGS.get(decoding, ()),
        f"torch_num_threads={threads}",
        f"env.num_threads={threads}",
    ]
    retrain = args.retrain and not evaluate_only
    finished = None if retrain else latest_checkpoint(run_dir / "checkpoints")
    trained = finished is None or finished.name != f"iter_{stage.steps:06d}"
    if not trained and decoding is None:
        return {"trained": False, "wall_min": 0.0, "success": None}
    if finished is not None:
        # Resuming a finished run trains nothing and runs the final evaluation; resuming a run that
        # stopped early trains the remaining steps exactly as the uninterrupted run would have.
        command = [sys.executable, "-m", "vla_rl.cli", "sft", "--resume", str(finished), *evaluation]
    else:
        command = [
            sys.executable,
            "-m",
            "vla_rl.cli",
            "sft",
            *COMMON,
            *FAMILY_OVERRIDES[family],
            f"optim.learning_rate={stage.learning_rate:g}",
            f"data.path={dataset}",
            f"data.max_episodes={budget}",
            f"steps={stage.steps}",
            f"batch_size={args.batch_size}",
            f"checkpoint_interval={min(stage.steps, CHECKPOINT_INTERVAL)}",
            *([f"policy.init_from={init_from}"] if init_from is not None else []),
            *evaluation,
            f"run_dir={run_dir}",
        ]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall_min = (time.perf_counter() - start) / 60.0
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log_suffix = f"_{decoding}" if evaluate_only else ""
    (run_dir.parent / f"{run_dir.name}{log_suffix}.log").write_text(proc.stdout + proc.stderr)
    matches = SUCCESS_PATTERN.findall(proc.stdout)
    if proc.returncode != 0:
        print(f"  {run_dir.name}: exit code {proc.returncode}, see {run_dir}.log", flush=True)
    return {
        "trained": trained,
        "wall_min": wall_min,
        "success": float(matches[-1][1]) / 100.0 if matches else float("nan"),
        "threads": threads,
        "jobs": args.jobs,
    }


def train_and_evaluate(
    family: str, budget: int, dataset: Path, run_root: Path, args: argparse.Namespace
) -> dict[str, object]:
    """Every stage of one (family, budget) in turn; returns the last stage's success rate in each
    decoding, the total steps and the stages (``keep_training_times`` adds the row's totals)."""
    if budget != 0:
        stages: tuple[Stage, ...] = (Stage(args.steps_small),)
    elif args.steps:
        stages = (Stage(args.steps),)
    else:
        stages = FULL_BUDGET_STAGES[family]
    criterion, *others = FAMILY_DECODINGS[family]
    rows, init_from = [], None
    for index, stage in enumerate(stages):
        run_dir = stage_dir(run_root, family, budget, stages, index)
        decoding = criterion if index == len(stages) - 1 else None
        row = run_stage(family, budget, stage, run_dir, init_from, decoding, dataset, args)
        settings = {"steps": stage.steps, "learning_rate": stage.learning_rate, "run_dir": str(run_dir)}
        rows.append({**settings, **row})
        init_from = run_dir
    by_decoding = {criterion: rows[-1]["success"]}
    for decoding in others:  # the finished last stage, evaluated again on the same episodes
        again = run_stage(
            family, budget, stages[-1], run_dir, None, decoding, dataset, args, evaluate_only=True
        )
        by_decoding[decoding] = again["success"]
    return {
        "success": rows[-1]["success"],
        "decoding": criterion,
        "success_by_decoding": by_decoding,
        "steps": sum(stage.steps for stage in stages),
        "execute_steps": EXECUTE_STEPS,
        "checkpoint": rows[-1]["run_dir"],
        "stages": rows,
    }


def keep_training_times(row: dict, previous: dict) -> None:
    """Stages that trained in an earlier invocation keep how that run was timed (wall, threads,
    jobs); this invocation only evaluated them, or skipped them. Then the row's totals: wall time,
    whether anything trained, and the last stage's threads and jobs."""
    earlier = {stage["run_dir"]: stage for stage in previous.get("stages", [])}
    for stage in row["stages"]:
        before = earlier.get(stage["run_dir"], {})
        if not stage["trained"] and before.get("trained"):
            # Threads and jobs of this invocation say nothing of how the stage trained.
            stage.update({key: before.get(key) for key in ("wall_min", "threads", "jobs")})
            stage["trained"] = True
    row["wall_min"] = sum(stage["wall_min"] for stage in row["stages"])
    row["trained"] = any(stage["trained"] for stage in row["stages"])
    row.update({key: row["stages"][-1].get(key) for key in ("threads", "jobs")})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    families = list(FAMILY_OVERRIDES)
    parser.add_argument("--families", nargs="+", default=families, choices=families)
    parser.add_argument("--budgets", nargs="+", type=int, default=[5, 20, 100, 0], help="0 = full")
    parser.add_argument("--full", type=int, default=1000, help="demonstrations in the full budget")
    parser.add_argument("--noise-std", type=float, default=0.2, help="action noise while collecting")
    parser.add_argument(
        "--steps", type=int, default=None, help="optimizer steps, full budget (default: per family)"
    )
    parser.add_argument(
        "--steps-small", type=int, default=8000, help="SFT optimizer steps for the smaller budgets"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs side by side, each with cores/jobs threads (2 one-thread runs: 1.23x the steps/s of one)",
    )
    parser.add_argument("--eval-episodes", type=int, default=64)
    parser.add_argument("--run-root", type=Path, default=Path("runs/bench/sft_pick_place"))
    add_results_name(parser, "sft_pick_place")
    parser.add_argument(
        "--retrain", action="store_true", help="train again even where a run finished (default: evaluate it)"
    )
    return parser


def main() -> None:
    args = build_parser().parse_args()
    results_path, plot_path = results_files(args.results_name)

    print(f"machine: {machine_line()}")
    print(
        f"pick_place, {args.full} scripted demonstrations in the full budget; "
        f"{args.steps or FULL_BUDGET_STAGES} steps x batch {args.batch_size} with the full budget, "
        f"{args.steps_small} with the smaller ones; {args.eval_episodes} evaluation episodes "
        f"(split train); {args.jobs} run(s) at a time"
    )
    noise_tag = f"_noise{args.noise_std:g}".replace(".", "") if args.noise_std > 0 else ""
    dataset = args.run_root / f"demos_{args.full}{noise_tag}"
    collect(dataset, args.full, args.noise_std)
    saved = json.loads(results_path.read_text()) if results_path.is_file() else {}
    same_data = saved.get("full") == args.full and saved.get("noise_std") == args.noise_std
    results: dict[str, dict[str, dict[str, float]]] = saved.get("results", {}) if same_data else {}
    print(f"{'family':<10} {'demos':>6} {'steps':>6} {'success':>8} {'wall':>7}  by decoding")
    runs = [(family, budget) for family in args.families for budget in args.budgets]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = pool.map(lambda run: train_and_evaluate(*run, dataset, args.run_root, args), runs)
        for (family, budget), row in zip(runs, rows, strict=True):
            keep_training_times(row, results.get(family, {}).get(str(budget), {}))
            results.setdefault(family, {})[str(budget)] = row
            demos, success = budget or args.full, 100 * row["success"]
            by_decoding = row["success_by_decoding"].items()
            decodings = "  ".join(f"{name} {100 * value:.1f} %" for name, value in by_decoding)
            print(
                f"{family:<10} {demos:>6} {row['steps']:>6} {success:>7.1f}% {row['wall_min']:>6.1f}m",
                f" {decodings}",
                flush=True,
            )
            RESULTS_DIR.mkdir(exist_ok=True)
            summary = {"machine": machine_line(), "full": args.full, "noise_std": args.noise_std}
            results_path.write_text(json.dumps({**summary, "results": results}, indent=1))
    plot(results, args.full, TARGET_SUCCESS, plot_path)
    for family, by_budget in results.items():
        full = by_budget.get("0")
        if full is not None:
            verdict = "PASS" if full["success"] >= TARGET_SUCCESS else "FAIL"
            success, target, decoding = 100 * full["success"], 100 * TARGET_SUCCESS, full["decoding"]
            print(f"{family}: full budget {success:.1f} % {decoding} (target {target:.0f} %) {verdict}")


if __name__ == "__main__":
    main()
