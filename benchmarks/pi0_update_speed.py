"""pi0's PPO update on `pick_place`: seconds per update with the denoising steps batched and the frozen
prefix reused, against the same update with either switched off, side by side in one run.

The update is ``pi0_flow_noise_ppo``'s (1,024 decisions x 4 epochs x 8 minibatches, the VLM frozen),
on one rollout of the policy at ``--init``, from the same weights, optimiser state and minibatch order
for every variant (restored before each repeat; the variants take turns). The variants:

* ``step by step``: the stored chain's K velocities computed one call after another on a prefix
  encoded in every minibatch (how the update ran before the two changes below);
* ``batched``: the K velocities in one call of N x K rows (``Pi0Policy.transitions_of_chain``), the
  prefix still encoded in every minibatch (``policy.exploration.reuse_frozen_prefix=false``);
* ``batched + prefix reuse``: as run by default; the update encodes each observation's prefix once,
  in its recomputation pass, and every epoch reuses it (``observation_cache``).

    python -m benchmarks.pi0_update_speed [--init runs/bench/sft_pp12k/pi0_200] [--repeats 3]

Without ``--init`` (or when it does not exist) the policy is a randomly initialised pi0 of the SFT
benchmark's size: the timings depend on the sizes, not on the weights.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import tempfile
import time
import types
from pathlib import Path

import torch

from benchmarks.common import machine_line
from vla_rl.policies.flow import chain
from vla_rl.policies.flow.exploration import chain_transitions
from vla_rl.policies.registry import build_chunk_policy
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer

DEFAULT_INIT = "runs/bench/sft_pp12k/pi0_200"
RANDOM_PI0 = {
    "chunk_len": 4,
    "action_dim": 4,
    "proprio_dim": 32,
    "camera_keys": ["front"],
    "state_keys": ["proprio", "objects"],
    "proprio_fields": ["arm_qpos", "gripper_opening_m", "tcp_pos", "tcp_rot6"],
    "num_layers": 4,
}
"""The SFT benchmark's pi0 (``benchmarks.sft_pick_place``) without its auxiliary head."""
VARIANTS = ("step by step", "batched", "batched + prefix reuse")


def step_by_step_transitions(self, prefix, states, step_mask, temperature):
    """The peer: K velocity calls in sequence, as a sampler makes them."""
    times = chain.denoising_times(self.num_steps).tolist()
    velocities, stds, feature = [], [], None
    for k in range(self.num_steps):
        velocity, std, state_feature = self.velocity_and_std(prefix, states[:, k], times[k])
        feature = state_feature if feature is None else feature
        velocities.append(velocity)
        stds.append(std)
    learned = None if stds[0] is None else torch.stack(stds, 1)
    means, transition_stds = chain_transitions(
        self.exploration, states, torch.stack(velocities, 1), step_mask, temperature, learned
    )
    return means, transition_stds, feature


def set_variant(policy, variant: str) -> None:
    policy.cfg.reuse_frozen_prefix = variant == "batched + prefix reuse"
    if variant == "step by step":
        policy.transitions_of_chain = types.MethodType(step_by_step_transitions, policy)
    else:
        policy.__dict__.pop("transitions_of_chain", None)


def init_dir(requested: str, scratch: Path) -> str:
    if Path(requested).exists():
        return requested
    print(f"{requested} not found: timing a randomly initialised pi0 of the SFT benchmark's size")
    torch.manual_seed(0)
    build_chunk_policy("pi0", **RANDOM_PI0).save_pretrained(str(scratch / "pi0"))
    return str(scratch / "pi0")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init", default=DEFAULT_INIT, help="the pi0 SFT run or policy folder to start from")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cfg = compose_rl_config(
            [
                "recipe=pi0_flow_noise_ppo",
                f"policy.init_from={init_dir(args.init, Path(scratch))}",
                f"run_dir={scratch}/run",
                "logger.wandb_mode=disabled",
            ]
        )
        trainer = ChunkRLTrainer(cfg)
        acfg = cfg.algorithm
        collect_s = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            trainer.source.obs, _ = trainer.collector.collect(trainer.source.obs, acfg.num_decisions)
            batch = trainer.collector.buffer
            collect_s.append(time.perf_counter() - start)
        algorithm, policy = trainer.algorithm, trainer.policy
        weights = copy.deepcopy(policy.state_dict())
        optimiser = copy.deepcopy(algorithm.optimizer.state_dict())
        seconds: dict[str, dict[str, list[float]]] = {v: {"recompute": [], "update": []} for v in VARIANTS}
        for repeat in range(args.repeats):
            for offset in range(len(VARIANTS)):
                variant = VARIANTS[(repeat + offset) % len(VARIANTS)]
                policy.load_state_dict(weights)
                algorithm.optimizer.load_state_dict(optimiser)
                algorithm.generator.manual_seed(0)
                set_variant(policy, variant)
                start = time.perf_counter()
                metrics = algorithm.update(batch, iteration=10)
                seconds[variant]["update"].append(time.perf_counter() - start)
                seconds[variant]["recompute"].append(metrics["recompute_time_s"])
        trainer.close()
    print(machine_line(), f"torch threads {cfg.torch_num_threads}")
    rollout = statistics.median(collect_s)
    print(
        f"pi0_flow_noise_ppo update: {acfg.num_decisions * cfg.env.num_envs} decisions, "
        f"{acfg.num_epochs} epochs x {acfg.num_minibatches} minibatches, {policy.num_steps} denoising "
        f"steps; medians of {args.repeats}; rollout of the same decisions {rollout:.2f} s"
    )
    peer = statistics.median(seconds["step by step"]["update"])
    print(f"{'variant':<26} {'recompute s':>12} {'update s':>10} {'speed-up':>9} {'iteration s':>12}")
    for variant in VARIANTS:
        update = statistics.median(seconds[variant]["update"])
        recompute = statistics.median(seconds[variant]["recompute"])
        speed_up = peer / update
        print(f"{variant:<26} {recompute:>12.2f} {update:>10.2f} {speed_up:>8.2f}x {rollout + update:>12.2f}")


if __name__ == "__main__":
    main()
