"""RL from an imported LeRobot checkpoint: ``vla-rl collect`` (v3.0) -> LeRobot's own pi0 SFT -> vla-rl RL.

1. ``vla-rl collect env=reach env.cameras=[front]``: ``--episodes`` scripted-expert episodes of MuJoCo
   ``reach`` with one 64 x 64 camera, written as a LeRobot v3.0 dataset (the collect default);
2. ``tests/lerobot/lerobot_pi0_sft.py`` in ``.venv-lerobot``: a tiny LeRobot pi0 (LeRobot's classes at
   reduced width) trained by LeRobot's ``lerobot_train.train`` on that dataset for ``--sft-steps``
   optimiser steps; LeRobot saves the policy folder (``checkpoints/last/pretrained_model``);
3. ``vla-rl train recipe=pi0_flow_sde_ppo policy.init_from=<that folder>`` on ``reach`` with the same
   camera for ``--rl-updates`` updates; the run evaluates the greedy policy on 64 episodes before the
   first update and after the last;
4. ``lerobot_eval``: ``vla-rl export --format lerobot`` of the RL run, evaluated again by LeRobot's side
   (``tests/lerobot/lerobot_pi_eval.py`` in ``.venv-lerobot``: LeRobot's ``from_pretrained``, processors
   and ``select_action`` on vla-rl's ``reach`` env, in one process) on the same 64 episodes and noise
   as vla-rl's evaluation of the run's last checkpoint, and LeRobot's SFT folder likewise against
   the run's start; compared episode by episode (``benchmarks/lerobot_eval.py``).

LeRobot 0.4's pi0 needs openpi's ``transformers_replace`` files: give an openpi checkout with
``--openpi`` (see tests/lerobot/make_pi_fixtures.py). Run from the repository root::

    python -m benchmarks.lerobot_pi0_rl --openpi OPENPI_CHECKOUT --work /tmp/lerobot_pi0_rl

Results (success before and after, LeRobot's success on the export, SFT loss, wall clock) go to
``benchmarks/results/lerobot_pi0_rl.json``; the declaration and the discussion are in
``benchmarks/results/lerobot_pi0_rl.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS_DIR, lerobot_env, machine_line, run_logged
from benchmarks.lerobot_eval import compare, evaluate_in_lerobot, evaluate_run

REPO = Path(__file__).resolve().parents[1]
LEROBOT_SCRIPT = REPO / "tests" / "lerobot" / "lerobot_pi0_sft.py"
ENV = ("env=reach", "env.cameras=[front]", "env.image_size=64")
STAGES = ("collect", "sft", "rl", "lerobot_eval")
SFT_FOLDER = Path("train") / "checkpoints" / "last" / "pretrained_model"
"""The policy folder LeRobot's training saves, below its output folder."""


def collect(args: argparse.Namespace, dataset: Path) -> float:
    command = [
        str(args.vla_rl),
        "collect",
        *ENV,
        "env.num_envs=25",
        f"num_episodes={args.episodes}",
        "record_privileged=false",
        f"seed={args.seed}",
        f"output_dir={dataset}",
    ]
    return run_logged(command, args.work / "collect.log")


def lerobot_sft(args: argparse.Namespace, dataset: Path, out: Path) -> float:
    command = [
        str(args.lerobot_python),
        str(LEROBOT_SCRIPT),
        "--openpi",
        str(args.openpi),
        "--dataset",
        str(dataset),
        "--out",
        str(out),
        "--steps",
        str(args.sft_steps),
        "--batch-size",
        str(args.batch_size),
        "--num-workers",
        str(args.num_workers),
        "--seed",
        str(args.seed),
    ]
    return run_logged(command, args.work / "lerobot_sft.log", env=lerobot_env(args.work / "hf_home"))


def rl(args: argparse.Namespace, folder: Path, tokenizer: Path, run_dir: Path) -> float:
    command = [
        str(args.vla_rl),
        "train",
        "recipe=pi0_flow_sde_ppo",
        "policy.name=pi0",
        f"policy.init_from={folder}",
        f"policy.tokenizer_dir={tokenizer}",
        *ENV,
        f"iterations={args.rl_updates}",
        f"eval.interval={args.rl_updates}",
        f"seed={args.seed}",
        "torch_num_threads=1",
        "env.num_threads=1",
        "logger.progress_bar=false",
        "logger.wandb_mode=disabled",
        f"run_dir={run_dir}",
    ]
    return run_logged(command, args.work / "rl.log")


def lerobot_eval(
    args: argparse.Namespace, sft_folder: Path, run_dir: Path, tokenizer: Path, work: Path
) -> float:
    """LeRobot's evaluations next to vla-rl's (``benchmarks.lerobot_eval``), episode by episode: of the
    folder LeRobot's SFT saved against the run's start, and of the RL run's export against its last
    checkpoint; each comparison goes to ``work/<before|after>/comparison.json``."""
    start = time.perf_counter()
    work.mkdir(parents=True)
    export = work / "export"
    run_logged(
        [str(args.vla_rl), "export", "--format", "lerobot", str(run_dir), str(export)], work / "export.log"
    )
    folders = {"before": sft_folder, "after": export}
    for when, folder in folders.items():
        _, policy, ours = evaluate_run(run_dir, start=when == "before")
        # LeRobot's transformers 4.53 cannot read the export's tokenizer/ (saved by transformers 5): it
        # gets the one it trained with.
        theirs = evaluate_in_lerobot(
            args.lerobot_python, args.openpi, folder, tokenizer, ours.spec, work / when
        )
        comparison = {"folder": str(folder), **compare(policy, ours, theirs)}
        (work / when / "comparison.json").write_text(json.dumps(comparison, indent=1) + "\n")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument("--work", type=Path, required=True, help="folder for the dataset, runs and logs")
    parser.add_argument("--episodes", type=int, default=200, help="demonstrations collected")
    parser.add_argument("--sft-steps", type=int, default=1500, help="LeRobot's optimiser steps")
    parser.add_argument("--batch-size", type=int, default=32, help="LeRobot's SFT batch")
    parser.add_argument("--num-workers", type=int, default=1, help="LeRobot's data-loading workers")
    parser.add_argument("--rl-updates", type=int, default=40, help="vla-rl's PPO updates (the RL budget)")
    parser.add_argument(
        "--from-stage",
        choices=STAGES,
        default=STAGES[0],
        help="start at this stage, reusing the earlier stages' outputs in --work",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vla-rl", type=Path, default=Path(sys.executable).parent / "vla-rl")
    parser.add_argument("--lerobot-python", type=Path, default=REPO / ".venv-lerobot" / "bin" / "python")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR / "lerobot_pi0_rl.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    folders = ("dataset", "lerobot", "rl", "lerobot_eval")
    outputs = dict(zip(STAGES, (args.work / folder for folder in folders), strict=True))
    start = STAGES.index(args.from_stage)
    for stage in STAGES[start:]:
        if outputs[stage].exists():
            raise SystemExit(f"{outputs[stage]} exists: give a fresh --work folder or a later --from-stage")
    dataset, lerobot_out, run_dir = outputs["collect"], outputs["sft"], outputs["rl"]
    tokenizer = lerobot_out / "tokenizer"
    folder = lerobot_out / SFT_FOLDER
    stages = {
        "collect": lambda: collect(args, dataset),
        "sft": lambda: lerobot_sft(args, dataset, lerobot_out),
        "rl": lambda: rl(args, folder, tokenizer, run_dir),
        "lerobot_eval": lambda: lerobot_eval(args, folder, run_dir, tokenizer, outputs["lerobot_eval"]),
    }
    seconds = {stage: stages[stage]() for stage in STAGES[start:]}
    if start > 0 and args.results.is_file():  # the earlier stages' times, from the run that made them
        seconds = {**json.loads(args.results.read_text()).get("seconds", {}), **seconds}

    with np.load(lerobot_out / "sft.npz") as sft:
        loss = sft["loss"]
    evaluations = json.loads((run_dir / "evaluations.json").read_text())
    before, after = evaluations[0], evaluations[-1]
    comparisons = {
        when: json.loads((outputs["lerobot_eval"] / when / "comparison.json").read_text())
        for when in ("before", "after")
    }
    result = {
        "machine": machine_line(),
        "episodes": args.episodes,
        "sft_steps": args.sft_steps,
        "sft_batch": args.batch_size,
        "sft_loss_first_50": float(loss[:50].mean()),
        "sft_loss_last_50": float(loss[-50:].mean()),
        "rl_updates": args.rl_updates,
        "evaluations": [
            {
                k: e[k]
                for k in ("iteration", "success_rate", "success_once_rate", "mean_return", "num_episodes")
            }
            for e in evaluations
        ],
        "success_before": before["success_rate"],
        "success_after": after["success_rate"],
        "success_before_lerobot": comparisons["before"]["lerobot"]["success"],
        "success_after_lerobot": comparisons["after"]["lerobot"]["success"],
        "lerobot_eval": comparisons,
        "seconds": seconds,
    }
    args.results.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
