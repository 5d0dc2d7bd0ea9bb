"""MetaWorld end to end: scripted demonstrations -> SFT of a pi0 VLA -> RL fine-tuning, per task.

On a subset of MT10 (default: reach, drawer-close, button-press-topdown, window-open):

1. record ``--demos`` expert episodes (10 per task by default; xyz noise 0.3 on the executed action,
   the clean expert action kept as the label) with the ``corner`` camera at 64x64;
2. ``vla-rl sft``: a tiny pi0 (4 layers, built from its config) on images, instruction and
   MetaWorld's 39-D state, ``--sft-steps`` steps: a deliberately short run, a weak start;
3. ``vla-rl train recipe=pi0_flow_sde`` from that checkpoint for ``--minutes`` of wall clock (its
   clock includes the evaluation of the start), 16 worlds laid out in blocks of one task so that each
   GRPO group of 4 (one reset seed) holds one task.

The RL run evaluates the greedy policy (the ODE from noise) on 64 episodes before and after; the
table gives success per task and the mean, and the target is +20 points of mean success. Runs in
the MetaWorld venv (``make .venv-metaworld``):

    .venv-metaworld/bin/python -m benchmarks.metaworld_sft_rl [--minutes 50] [--summarise]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.common import machine_line, run_logged

TASKS = "reach-v3+drawer-close-v3+button-press-topdown-v3+window-open-v3"
TARGET_GAIN = 0.20
RESULTS = Path(__file__).parent / "results" / "metaworld_sft_rl.json"
POLICY = (
    "sft/policy=pi0",
    "policy.kwargs.action_dim=4",
    "policy.kwargs.proprio_dim=39",
    "+policy.kwargs.state_keys=[privileged]",
    "policy.kwargs.camera_keys=[corner]",
    "+policy.kwargs.num_layers=4",
)
ENV = ("env=metaworld", f"env.task={TASKS}", "+env.options.task_layout=blocks", "env.cameras=[corner]")


def run_minutes(command: list[str], log: Path) -> float:
    return run_logged(command, log) / 60.0


def stages(args: argparse.Namespace) -> dict[str, float]:
    root = args.root
    root.mkdir(parents=True, exist_ok=True)
    data, sft, rl = root / "demos", root / "sft", root / "rl"
    cli = [sys.executable, "-m", "vla_rl.cli"]
    minutes = {}
    minutes["collect"] = run_minutes(
        [sys.executable, "-m", "vla_rl.data.metaworld_collect", TASKS, "--episodes", str(args.demos),
         "--output", str(data), "--num-envs", "8", "--cameras", "corner", "--image-size", "64",
         "--max-steps", "150", "--noise-std", "0.3", "--seed", "0"],
        root / "collect.log",
    )  # fmt: skip
    minutes["sft"] = run_minutes(
        [*cli, "sft", *ENV, f"data.path={data}", "data.action_key=expert_action", *POLICY,
         f"steps={args.sft_steps}", "eval.interval=0", "eval.num_episodes=0", "logger.wandb_mode=disabled",
         "torch_num_threads=2", f"run_dir={sft}"],
        root / "sft.log",
    )  # fmt: skip
    minutes["rl"] = run_minutes(
        [*cli, "train", "recipe=pi0_flow_sde", *ENV, "env.num_envs=16", "algorithm.group_size=4",
         f"policy.init_from={sft}", f"max_minutes={args.minutes}", "iterations=1000000",
         "eval.num_episodes=64", "eval.interval=50", "logger.wandb_mode=disabled", "torch_num_threads=2",
         f"run_dir={rl}"],
        root / "rl.log",
    )  # fmt: skip
    return minutes


def summarise(rl_dir: Path, minutes: dict[str, float]) -> dict:
    evaluations = json.loads((rl_dir / "evaluations.json").read_text())
    before, after = evaluations[0], evaluations[-1]
    gain = after["success_rate"] - before["success_rate"]
    print(machine_line())
    print(f"RL iterations {after['iteration']}, {after['minutes']:.1f} min on the RL clock")
    print(f"{'task':<34} {'SFT':>7} {'SFT+RL':>7}")
    for text in before["success_by_instruction"]:
        b, a = before["success_by_instruction"][text], after["success_by_instruction"].get(text, float("nan"))
        print(f"{text:<34} {100 * b:>6.1f}% {100 * a:>6.1f}%")
    mean_before, mean_after = 100 * before["success_rate"], 100 * after["success_rate"]
    print(f"{'mean (64 episodes)':<34} {mean_before:>6.1f}% {mean_after:>6.1f}%")
    for entry in evaluations[1:-1]:
        print(f"  evaluation at iteration {entry['iteration']}: {100 * entry['success_rate']:.1f} %")
    met = gain >= TARGET_GAIN
    print(f"gain {100 * gain:+.1f} points; target +{100 * TARGET_GAIN:.0f}: {'met' if met else 'not met'}")
    result = {"machine": machine_line(), "tasks": TASKS, "minutes": minutes, "before": before,
              "after": after, "evaluations": evaluations, "gain": gain, "target_met": met}  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("runs/bench/metaworld_sft_rl"))
    parser.add_argument("--demos", type=int, default=40, help="expert episodes over all tasks")
    parser.add_argument("--sft-steps", type=int, default=1000)
    parser.add_argument(
        "--minutes", type=float, default=50.0, help="RL wall clock (its evaluations included)"
    )
    parser.add_argument("--summarise", action="store_true", help="only print the table of a finished run")
    args = parser.parse_args()
    minutes = {} if args.summarise else stages(args)
    summarise(args.root / "rl", minutes)


if __name__ == "__main__":
    main()
