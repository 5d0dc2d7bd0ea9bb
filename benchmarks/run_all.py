"""Run every benchmark in turn (``make bench``); each prints its own summary.

The learning benchmark takes about 1.5 hours on a 2-core machine and the SFT sweep (three
families x four demonstration budgets, about 25 minutes a run) about 5 hours, the RL runs (four
recipes, an hour each) 4 hours, PPO on reward models about 40 minutes; ``--quick`` skips them and
the diagnostics that read the SFT runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

SFT_FULL_RUNS = [f"runs/bench/sft_pick_place/{family}_full" for family in ("token_vla", "chunk_vla", "pi0")]
BENCHMARKS = {
    "throughput": ["-m", "benchmarks.throughput"],
    "rollout_ratio": ["-m", "benchmarks.rollout_ratio"],
    "render": ["-m", "benchmarks.render_speed"],
    "dataset_writing": ["-m", "benchmarks.dataset_writing"],
    "backend_speed": ["-m", "benchmarks.backend_speed"],
    "pipeline_stages": ["-m", "benchmarks.pipeline_stages"],
    "vla_inference": ["-m", "benchmarks.vla_inference"],
    "flow_inference": ["-m", "benchmarks.flow_inference"],
    "pi0_update_speed": ["-m", "benchmarks.pi0_update_speed"],
    "sac_update_speed": ["-m", "benchmarks.sac_update_speed"],
    "learning": ["-m", "benchmarks.learning"],
    "gym_tutorial": ["-m", "benchmarks.gym_tutorial"],
    "sft_pick_place": ["-m", "benchmarks.sft_pick_place"],
    "sft_grounding": ["-m", "benchmarks.sft_grounding", *SFT_FULL_RUNS],
    "flow_exploration_spread": [
        "-m",
        "benchmarks.flow_exploration_spread",
        "--init",
        "runs/bench/sft_pick_place/pi0_200",
    ],
    "rl_pick_place": ["-m", "benchmarks.rl_pick_place"],
    "reward_scoring": ["-m", "benchmarks.reward_scoring"],
    "reward_model_ppo": ["-m", "benchmarks.reward_model_ppo"],
    "metaworld_sft_rl": ["-m", "benchmarks.metaworld_sft_rl"],
    "rlpd_vs_ppo": ["-m", "benchmarks.rlpd_vs_ppo"],
    "hg_dagger": ["-m", "benchmarks.hg_dagger"],
    "frozen_policy_rl": ["-m", "benchmarks.frozen_policy_rl"],
    "deploy_success": ["-m", "benchmarks.deploy_success"],
    "deploy_latency": ["-m", "benchmarks.deploy_latency"],
    "sft_failure_stages": [
        "-m",
        "benchmarks.sft_failure_stages",
        *SFT_FULL_RUNS,
        "--execute-steps",
        "4",
        "2",
    ],
}
LONG = {
    "learning",
    "sft_pick_place",
    "sft_grounding",
    "sft_failure_stages",
    "flow_exploration_spread",
    "rl_pick_place",
    "reward_model_ppo",
    "metaworld_sft_rl",
    "rlpd_vs_ppo",
    "hg_dagger",
    "frozen_policy_rl",
}
INTERPRETERS = {"metaworld_sft_rl": ".venv-metaworld/bin/python"}
"""Benchmarks whose backend lives in its own venv (``make .venv-metaworld``)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the long learning and SFT benchmarks")
    args = parser.parse_args()
    failed = []
    for name, argv in BENCHMARKS.items():
        if args.quick and name in LONG:
            continue
        print(f"== {name}", flush=True)
        if subprocess.run([INTERPRETERS.get(name, sys.executable), *argv]).returncode != 0:
            failed.append(name)
    if failed:
        sys.exit(f"benchmarks that exited with an error: {', '.join(failed)}")


if __name__ == "__main__":
    main()
