"""RL fine-tuning on ``pick_place`` from few-demonstration SFT checkpoints, one run per recipe.

For each recipe (``configs/recipe``: token VLA + PPO, token VLA + GRPO, pi0 + Flow-SDE, pi0 +
Flow-Noise) ``vla-rl train`` starts from the family's SFT checkpoint written by
``benchmarks.sft_pick_place`` (``--sft-budget`` demonstrations), trains for the recipe's budget in
updates (``iterations``) with ``--minutes`` of wall clock as a cap, and evaluates before, every few
iterations and after, in distribution and on the out-of-distribution splits. The verdict (+30
points, or at least 90 %) is judged by a closing evaluation of the SFT start and the final policy,
in the recipe's evaluation mode, on the same ``--judge-episodes`` in-distribution episodes (512 by
default: one 64-episode evaluation moves by +-6 points from its draw of initial states and actions
alone); the learning curves go to ``benchmarks/results/rl_pick_place.png`` and everything to
``benchmarks/results/rl_pick_place.json``.

    python -m benchmarks.rl_pick_place [--recipes token_vla_grpo pi0_flow_sde_ppo] [--minutes 60]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import RESULTS_DIR, add_results_name, machine_line, results_files
from vla_rl.training.chunk_rl.config_load import load_rl_config_file

RECIPES = ("token_vla_ppo", "token_vla_grpo", "pi0_flow_sde_ppo", "pi0_flow_noise_ppo")
"""The default set, one recipe per row of the target: both flow rows are trained with PPO."""
FAMILY = {
    "token_vla_ppo": "token_vla",
    "token_vla_grpo": "token_vla",
    "pi0_flow_sde": "pi0",  # Flow-SDE with GRPO, run on request (not in the default set)
    "pi0_flow_sde_ppo": "pi0",
    "pi0_flow_noise": "pi0",  # Flow-Noise with GRPO, run on request (not in the default set)
    "pi0_flow_noise_ppo": "pi0",
}
TARGET_GAIN = 0.30
"""Required rise of in-distribution success (absolute) ..."""
TARGET_SUCCESS = 0.90
"""... or the success RL must reach."""
OOD_SPLITS = ("ood_position", "ood_visual", "ood_semantic")
TIMING_TAGS = {
    "rollout": "perf/rollout_time_s",
    "policy": "perf/policy_time_s",
    "sim": "perf/sim_time_s",
    "update": "train/update_time_s",
}
"""What ``timing_medians`` reports (``<name>_s``), from the chunk trainer's logged scalars."""


def sft_start(recipe: str, args: argparse.Namespace) -> Path:
    """The SFT run a recipe starts from: ``--init FAMILY=PATH`` or ``<sft-root>/<family>_<budget>``."""
    family = FAMILY[recipe]
    chosen = dict(item.split("=", 1) for item in args.init)
    return Path(chosen[family]) if family in chosen else args.sft_root / f"{family}_{args.sft_budget}"


def run_recipe(recipe: str, args: argparse.Namespace) -> dict:
    run_dir = args.run_root / recipe
    init_from = sft_start(recipe, args)
    splits = "[" + ",".join(args.ood_splits) + "]"
    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    command = [
        sys.executable,
        "-m",
        "vla_rl.cli",
        "train",
        f"recipe={recipe}",
        f"policy.init_from={init_from}",
        f"max_minutes={args.minutes}",  # a cap: the recipe's budget in updates ends the run
        "resume=auto",  # a run cut short continues from its last checkpoint, its clock too
        f"eval.num_episodes={args.eval_episodes}",
        f"eval.ood_splits={splits}",
        "logger.wandb_mode=disabled",
        f"torch_num_threads={threads}",
        f"env.num_threads={threads}",
        f"run_dir={run_dir}",
        *args.overrides,
    ]
    wall_min, exit_code = math.nan, None
    if not args.summarise:
        start = time.perf_counter()
        proc = subprocess.run(command, capture_output=True, text=True)
        wall_min = (time.perf_counter() - start) / 60.0
        args.run_root.mkdir(parents=True, exist_ok=True)
        (args.run_root / f"{recipe}.log").write_text(proc.stdout + proc.stderr)
        exit_code = proc.returncode
        if exit_code not in (0, 1):
            print(f"  {recipe}: exit code {exit_code}, see {args.run_root / recipe}.log", flush=True)
    if not (run_dir / "evaluations.json").is_file():
        return {"error": exit_code, "wall_min": wall_min}
    row = summarise_run(run_dir, args)
    row.update({"init_from": str(init_from), "wall_min": wall_min, "exit_code": exit_code})
    row.update({"threads": threads, "jobs": args.jobs})
    return row


def summarise_run(run_dir: Path, args: argparse.Namespace) -> dict:
    """Success before and after (each split's last evaluation), the curve and the closing checks."""
    evaluations = json.loads((run_dir / "evaluations.json").read_text())
    splits = ("train", *args.ood_splits)
    last = {split: max(e["iteration"] for e in evaluations if e["split"] == split) for split in splits}

    def success(iteration: int, split: str) -> float:
        found = [
            e["success_rate"] for e in evaluations if e["iteration"] == iteration and e["split"] == split
        ]
        return found[0] if found else float("nan")

    deterministic = load_rl_config_file(run_dir / "config.yaml", for_evaluation=True).eval.deterministic
    mode = "greedy" if deterministic else "sampled"
    judged = start_and_end(run_dir, args.judge_episodes, args.judge_worlds, (mode,))
    scalars = logged_scalars(run_dir)
    return {
        "eval_mode": mode,
        "iterations": last["train"],
        "before": {split: success(0, split) for split in splits},
        "after": {split: success(last[split], split) for split in splits},
        "after_iteration": last,
        "curve": [
            (minutes, e["success_rate"])
            for minutes, e in zip(joined_minutes(evaluations), evaluations, strict=True)
            if e["split"] == "train"
        ],
        "sampled_success": sampled_success_by_quarter(scalars),
        "timing": timing_medians(scalars),
        "start_end": start_and_end(run_dir, args.check_episodes),
        "judged": {"episodes": args.judge_episodes, "worlds": args.judge_worlds, **judged},
    }


def joined_minutes(evaluations: list[dict]) -> list[float]:
    """Each evaluation's minutes on one clock: a run resumed from a checkpoint that did not carry its
    clock (written before ``elapsed_s`` existed) restarts at 0, so after such a restart the minutes
    count on from the last evaluation before it."""
    joined, offset, previous = [], 0.0, 0.0
    for entry in evaluations:
        if entry["minutes"] + offset < previous:
            offset = previous
        previous = entry["minutes"] + offset
        joined.append(previous)
    return joined


def start_and_end(
    run_dir: Path, episodes: int, worlds: int | None = None, modes: tuple[str, ...] = ("greedy", "sampled")
) -> dict:
    """``benchmarks.rl_checkpoint_eval`` in its own process (torch threads are per process)."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.rl_checkpoint_eval",
        str(run_dir),
        "--episodes",
        str(episodes),
        "--modes",
        *modes,
    ]
    if worlds is not None:
        command += ["--worlds", str(worlds)]
    proc = subprocess.run(command, capture_output=True, text=True)
    return json.loads(proc.stdout) if proc.returncode == 0 else {"error": proc.returncode}


def logged_scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    """The run's TensorBoard scalars, tag -> {iteration: value} (a resumed run's repeated iterations
    once, with their later values, as TensorBoard keeps them)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()["scalars"]}


def sampled_success_by_quarter(scalars: dict[str, dict[int, float]]) -> list[float]:
    """Success of the rollouts' own (exploring) episodes in each quarter of the run's iterations
    (``logged_scalars``), weighted by episodes: hundreds of episodes per quarter, a finer signal than
    the evaluations."""
    if "rollout/success_rate" not in scalars:
        return []
    episodes = scalars.get("rollout/episodes", {})
    rows = [
        (step, value, episodes.get(step, 0.0))
        for step, value in sorted(scalars["rollout/success_rate"].items())
    ]
    quarters = []
    for k in range(4):
        part = rows[k * len(rows) // 4 : (k + 1) * len(rows) // 4]
        weight = sum(w for _, _, w in part)
        quarters.append(sum(v * w for _, v, w in part) / weight if weight else float("nan"))
    return quarters


def timing_medians(scalars: dict[str, dict[int, float]]) -> dict[str, float]:
    """Medians over the run's iterations (``logged_scalars``) of the seconds spent per update on the
    rollout, its policy and its simulator, and on the update itself, and of the simulator's
    milliseconds per world step (simulator seconds over env steps): the figure that says whether two
    runs' hours were alike."""
    medians = {
        f"{name}_s": statistics.median(scalars[tag].values())
        for name, tag in TIMING_TAGS.items()
        if scalars.get(tag)
    }
    sim, steps = scalars.get("perf/sim_time_s", {}), scalars.get("rollout/env_steps", {})
    per_step = [1000.0 * sim[i] / steps[i] for i in sim if steps.get(i)]
    if per_step:
        medians["sim_ms_per_world_step"] = statistics.median(per_step)
    return medians


def ood_change(row: dict, split: str) -> str:
    """``split before->after`` in %, with the iteration of "after" where it is not the run's last."""
    text = f"{split} {100 * row['before'][split]:.0f}->{100 * row['after'][split]:.0f}"
    at = row["after_iteration"][split]
    return text if at == row["iterations"] else f"{text} (it {at})"


def judged_success(row: dict) -> tuple[float, float]:
    """(SFT, RL) success the verdict rests on: the closing evaluation on ``--judge-episodes`` in the
    recipe's mode; rows written before it existed fall back to the run's first and last evaluation."""
    if "judged" not in row:
        return row["before"]["train"], row["after"]["train"]
    judged, mode = row["judged"], row["eval_mode"]
    if "error" in judged:  # the closing evaluation failed: no verdict
        return math.nan, math.nan
    return judged["SFT"][mode], judged["RL"][mode]


def passes(row: dict) -> bool:
    before, after = judged_success(row)
    return after - before >= TARGET_GAIN or after >= TARGET_SUCCESS


def plot(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.2, 3.4), dpi=120)
    for recipe, row in results.items():
        if "curve" in row:
            minutes, success = zip(*row["curve"], strict=True)
            axes.plot(minutes, [100 * s for s in success], marker="o", markersize=3, label=recipe)
    axes.set_xlabel("wall clock (min)")
    axes.set_ylabel("success, in distribution (%)")
    axes.set_ylim(-3, 103)
    axes.set_title("RL fine-tuning on pick_place")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=list(FAMILY))
    parser.add_argument("--minutes", type=float, default=60.0, help="wall-clock budget per run")
    parser.add_argument("--sft-budget", type=int, default=200, help="demonstrations of the SFT start")
    parser.add_argument("--sft-root", type=Path, default=Path("runs/bench/sft_pick_place"))
    parser.add_argument(
        "--init",
        nargs="*",
        default=[],
        metavar="FAMILY=PATH",
        help="SFT run of a family to start from instead of <sft-root>/<family>_<sft-budget>",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs side by side, each with cores/jobs torch threads"
    )
    parser.add_argument("--run-root", type=Path, default=Path("runs/bench/rl_pick_place"))
    parser.add_argument("--eval-episodes", type=int, default=64)
    parser.add_argument("--ood-splits", nargs="*", default=list(OOD_SPLITS))
    parser.add_argument(
        "--check-episodes",
        type=int,
        default=128,
        help="episodes of the closing greedy and sampled evaluations of the start and the end",
    )
    parser.add_argument(
        "--judge-episodes",
        type=int,
        default=512,
        help="in-distribution episodes of the closing evaluation that decides the verdict",
    )
    parser.add_argument(
        "--judge-worlds", type=int, default=64, help="worlds of that evaluation (which episodes it draws)"
    )
    parser.add_argument(
        "--summarise",
        action="store_true",
        help="train nothing: summarise the runs already in --run-root (e.g. after an interruption)",
    )
    add_results_name(parser, "rl_pick_place")
    parser.add_argument("overrides", nargs="*", help="extra config overrides for every run")
    args = parser.parse_args()

    print(f"machine: {machine_line()}")
    for recipe in args.recipes:
        if not sft_start(recipe, args).is_dir():
            raise SystemExit(f"{sft_start(recipe, args)} is missing: run benchmarks.sft_pick_place first")
    starts = {recipe: str(sft_start(recipe, args)) for recipe in args.recipes}
    print(f"pick_place, SFT starts {starts}; {args.minutes:g} min per recipe, {args.jobs} at a time")
    results_path, plot_path = results_files(args.results_name)
    saved = json.loads(results_path.read_text()) if results_path.is_file() else {}
    results = saved.get("results", {})
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda recipe: run_recipe(recipe, args), args.recipes))
    for recipe, row in zip(args.recipes, rows, strict=True):
        if args.summarise:  # keep what the training run measured
            row["wall_min"] = results.get(recipe, {}).get("wall_min", math.nan)
            row["exit_code"] = results.get(recipe, {}).get("exit_code", results.get(recipe, {}).get("error"))
        results[recipe] = row
        RESULTS_DIR.mkdir(exist_ok=True)
        results_path.write_text(json.dumps({"machine": machine_line(), "results": results}, indent=1))
        if "error" in row:
            continue
        ood = "  ".join(ood_change(row, split) for split in args.ood_splits)
        before, after = (100 * value for value in judged_success(row))
        verdict = "PASS" if passes(row) else "FAIL"
        sampled = "/".join(f"{100 * q:.0f}" for q in row["sampled_success"])
        print(
            f"{recipe:<16} SFT {before:5.1f} %  RL {after:5.1f} % {row.get('eval_mode', 'greedy')} "
            f"on {row.get('judged', {}).get('episodes', args.eval_episodes)} episodes "
            f"({row['iterations']} it, {row['wall_min']:.1f} min)  {verdict}",
            flush=True,
        )
        print(
            f"{'':<16} evaluations during the run ({args.eval_episodes} episodes): "
            f"{100 * row['before']['train']:.1f} -> {100 * row['after']['train']:.1f} %  {ood}  "
            f"rollouts by quarter {sampled} %",
            flush=True,
        )
        timing = row.get("timing", {})
        if "sim_ms_per_world_step" in timing:
            print(
                f"{'':<16} medians per update: rollout {timing.get('rollout_s', math.nan):.2f} s (policy "
                f"{timing.get('policy_s', math.nan):.2f}, simulator {timing.get('sim_s', math.nan):.2f}, "
                f"{timing['sim_ms_per_world_step']:.3f} ms per world step), update "
                f"{timing.get('update_s', math.nan):.2f} s",
                flush=True,
            )
        modes = row["start_end"]
        if "error" not in modes:
            print(
                f"{'':<16} {args.check_episodes} episodes: greedy {100 * modes['SFT']['greedy']:.1f} -> "
                f"{100 * modes['RL']['greedy']:.1f} %, sampled {100 * modes['SFT']['sampled']:.1f} -> "
                f"{100 * modes['RL']['sampled']:.1f} %",
                flush=True,
            )
    plot(results, plot_path)


if __name__ == "__main__":
    main()
