"""Pipelined rollout: collection throughput with 1, 2 and 4 stages side by side in one run.

With S stages the worlds split into S batches; the rollout loop sends one stage its actions and
runs the policy for the next while the first simulates. Two ways to simulate in the background:

* ``threads``: the stages live in the training process and each stage's physics and rendering run
  in a thread that releases the GIL (``env.pipeline_stages=S``);
* ``ray``: the stages live in one Ray env worker (its own process), which simulates the queued
  stages while the driver runs the policy (``distributed.runtime=ray distributed.env_workers=1``).

Every configuration is built first; then each repeat times one collection of each in turn
(interleaved, so drift hits all alike) and the figures are medians. Two workloads: ``pixels``
(reach from two 64x64 cameras, CNN actor: rendering and a CNN share the time) and ``state``
(push from state, MLP: the physics dominates).

    python -m benchmarks.pipeline_stages [--repeats 7] [--num-steps 32]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from benchmarks.common import machine_line
from vla_rl.config import compose_train_config
from vla_rl.distributed.remote_env import build_training_env
from vla_rl.training.components import build_training_components

WORKLOADS = {
    "pixels": ["env=reach_pixels", "policy=cnn", "algorithm=ppo_pixels", "env.num_envs=32"],
    "state": ["env=push", "policy=mlp", "algorithm=ppo", "env.num_envs=64"],
    # An inference-heavy policy (as a VLA is): a 3 x 1024 MLP, acting takes about as long as simulating.
    "heavy_policy": [
        "env=push",
        "policy=mlp",
        "algorithm=ppo",
        "env.num_envs=64",
        "policy.hidden_sizes=[1024,1024,1024]",
    ],
}
MODES = {
    "threads": ["env.num_threads=2"],
    # All configurations exist at once but only one collects at a time: a CPU each would leave the
    # third env worker waiting for a free CPU on a 2-core machine.
    "ray": [
        "distributed.runtime=ray",
        "distributed.env_workers=1",
        "env.num_threads=1",
        "distributed.env_worker_cpus=0.1",
    ],
}
STAGES = (1, 2, 4)
RESULTS = Path(__file__).parent / "results" / "pipeline_stages.json"


class Setup:
    """One configuration's env, collector and current observation."""

    def __init__(self, overrides: list[str]) -> None:
        cfg = compose_train_config([*overrides, "seed=0"])
        self.env = build_training_env(cfg.env, cfg.distributed)
        self.parts = build_training_components(cfg, self.env)
        self.obs, _ = self.env.reset(seed=cfg.seed)
        self.rates: list[float] = []
        self.policy_s: list[float] = []
        self.sim_s: list[float] = []

    def collect(self) -> None:
        self.obs, stats = self.parts.collector.collect(self.obs)
        self.rates.append(stats.env_steps_per_s)
        self.policy_s.append(stats.policy_time_s)
        self.sim_s.append(stats.sim_time_s)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--num-steps", type=int, default=32)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(machine_line())
    summary: dict[str, dict] = {}
    for workload in args.workloads:
        setups = {
            (mode, stages): Setup(
                [
                    *WORKLOADS[workload],
                    *MODES[mode],
                    f"env.pipeline_stages={stages}",
                    f"algorithm.num_steps={args.num_steps}",
                ]
            )
            for mode in MODES
            for stages in STAGES
        }
        for setup in setups.values():
            setup.collect()  # warm-up
            setup.rates.clear(), setup.policy_s.clear(), setup.sim_s.clear()
        for _ in range(args.repeats):
            for setup in setups.values():
                setup.collect()
        print(
            f"\n{workload}: {args.num_steps} steps x {setups['threads', 1].env.num_envs} worlds per "
            f"collection, median of {args.repeats}"
        )
        print(
            f"{'mode':<8} {'stages':>6} {'env-steps/s':>12} {'x 1 stage':>10} {'policy s':>9} "
            f"{'wait-for-sim s':>15}"
        )
        summary[workload] = {}
        for (mode, stages), setup in setups.items():
            rate = statistics.median(setup.rates)
            base = statistics.median(setups[mode, 1].rates)
            policy_s, sim_s = statistics.median(setup.policy_s), statistics.median(setup.sim_s)
            print(
                f"{mode:<8} {stages:>6} {rate:>12,.0f} {rate / base:>10.2f} {policy_s:>9.3f} {sim_s:>15.3f}"
            )
            summary[workload][f"{mode}/{stages}"] = {
                "env_steps_per_s": rate,
                "speedup_vs_1_stage": rate / base,
                "policy_s": policy_s,
                "wait_for_sim_s": sim_s,
            }
        for setup in reversed(setups.values()):  # the first Ray env started Ray: it closes last
            setup.env.close()
    RESULTS.write_text(json.dumps({"machine": machine_line(), "results": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
