"""LIBERO end to end at the scale of a 2-core CPU: expert demonstrations -> SFT of a tiny pi0 -> RL.

Two LIBERO-Object tasks (``libero_object/2+3``: the salad dressing and the bbq sauce into the
basket), both cameras at 64 x 64 turned as the field's datasets (``rotate180``):

1. ``vla-rl collect``: the scripted expert (``vla_rl.sims.libero.expert``), ``--demos`` successful
   episodes over both tasks from initial states 25 onwards (``first_init_state=25``: the
   evaluations below play states 0 ..), xyz noise 0.2 on the executed action with the clean expert
   action as the label;
2. ``vla-rl sft``: a tiny pi0 (4 layers, built from its config) on both cameras, the instruction and
   the 8-D state, ``--sft-steps`` steps;
3. ``vla-rl train recipe=pi0_flow_sde_ppo`` from that checkpoint for ``--updates`` updates (a
   ``--minutes`` wall-clock cap beside them), 4 worlds (2 per task) in 2 worker processes, success
   reward only (LIBERO has no dense reward to shape with). It evaluates the greedy policy before and
   after on ``--eval-episodes`` episodes: one world per task, in the protocol order, so initial
   states 0 .. eval-episodes / 2 - 1 of each task.

Runs in ``.venv-libero`` (``MUJOCO_GL=egl``):

    .venv-libero/bin/python -m benchmarks.libero_sft_rl [--demos 40] [--sft-steps 600] [--updates 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.common import machine_line, run_logged

TASKS = "libero_object/2+3"
CAMERAS = "[agentview,robot0_eye_in_hand]"
RESULTS = Path(__file__).parent / "results" / "libero_sft_rl.json"
ENV = (
    "env=libero",
    f"env.task={TASKS}",
    f"env.cameras={CAMERAS}",
    "env.image_size=64",
    "env.options.image_orientation=rotate180",
)
POLICY = (
    "sft/policy=pi0",
    "policy.kwargs.action_dim=7",
    "policy.kwargs.proprio_dim=8",
    f"policy.kwargs.camera_keys={CAMERAS}",
    "+policy.kwargs.num_layers=4",
)


def run_minutes(command: list[str], log: Path) -> float:
    return run_logged(command, log) / 60.0


def stages(args: argparse.Namespace) -> dict[str, float]:
    root = args.root
    root.mkdir(parents=True, exist_ok=True)
    data, sft, rl = root / "demos", root / "sft", root / "rl"
    cli = [sys.executable, "-m", "vla_rl.cli"]
    minutes = {}
    minutes["collect"] = run_minutes(
        [*cli, "collect", *ENV, "env.num_envs=2", "env.options.workers=2",
         "+env.options.init_states=protocol", "+env.options.first_init_state=25",
         f"num_episodes={args.demos}", "noise_std=0.2", "seed=0", f"output_dir={data}"],
        root / "collect.log",
    )  # fmt: skip
    minutes["sft"] = run_minutes(
        [*cli, "sft", *ENV, f"data.path={data}", "data.action_key=expert_action", *POLICY,
         f"steps={args.sft_steps}", "eval.interval=0", "eval.num_episodes=0", "logger.wandb_mode=disabled",
         "torch_num_threads=2", f"run_dir={sft}"],
        root / "sft.log",
    )  # fmt: skip
    if args.start_only:
        return minutes
    minutes["rl"] = run_minutes(
        [*cli, "train", "recipe=pi0_flow_sde_ppo", *ENV, "env.num_envs=4", "env.options.workers=2",
         "algorithm.progress_shaping=0.0", f"policy.init_from={sft}", f"iterations={args.updates}",
         f"max_minutes={args.minutes}", f"eval.num_episodes={args.eval_episodes}", "eval.num_envs=2",
         "eval.interval=1000000", "logger.wandb_mode=disabled", "torch_num_threads=2", f"run_dir={rl}"],
        root / "rl.log",
    )  # fmt: skip
    return minutes


def summarise(rl_dir: Path, minutes: dict[str, float], args: argparse.Namespace) -> dict:
    evaluations = json.loads((rl_dir / "evaluations.json").read_text())
    before, after = evaluations[0], evaluations[-1]
    print(machine_line())
    print(f"RL updates {after['iteration']}, {after['minutes']:.1f} min on the RL clock; stages {minutes}")
    print(f"{'task':<56} {'SFT':>7} {'SFT+RL':>7}")
    for text, rate in before["success_by_instruction"].items():
        later = after["success_by_instruction"].get(text, float("nan"))
        print(f"{text:<56} {100 * rate:>6.1f}% {100 * later:>6.1f}%")
    print(f"{'mean':<56} {100 * before['success_rate']:>6.1f}% {100 * after['success_rate']:>6.1f}%")
    result = {"machine": machine_line(), "date": time.strftime("%Y-%m-%d"), "tasks": TASKS,
              "settings": vars(args) | {"root": str(args.root)}, "minutes": minutes, "before": before,
              "after": after, "evaluations": evaluations}  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("runs/bench/libero_sft_rl"))
    parser.add_argument("--demos", type=int, default=40, help="expert episodes over both tasks")
    parser.add_argument("--sft-steps", type=int, default=600)
    parser.add_argument("--updates", type=int, default=20, help="the RL budget in updates")
    parser.add_argument("--minutes", type=float, default=60.0, help="RL wall-clock cap, evaluations in")
    parser.add_argument("--eval-episodes", type=int, default=10, help="greedy episodes before and after RL")
    parser.add_argument("--summarise", action="store_true", help="only print the table of a finished run")
    parser.add_argument("--start-only", action="store_true", help="collect and SFT only (ROOT/sft)")
    args = parser.parse_args()
    minutes = {} if args.summarise else stages(args)
    if args.start_only:
        print(f"{machine_line()}\nstart: {args.root / 'sft'}; minutes {minutes}")
        return
    summarise(args.root / "rl", minutes, args)


if __name__ == "__main__":
    main()
