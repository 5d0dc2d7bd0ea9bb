"""Success of an RL run's start and end, greedy and as sampled with the run's own exploration.

RL trains the policy that samples (token temperature, Flow-SDE or Flow-Noise chains); the trainer's
evaluations run it greedily. This evaluates the SFT starting point and the run's last checkpoint
both ways, on the same episodes (seeds), with the exploration settings of the run applied to both.

    python -m benchmarks.rl_checkpoint_eval RUN_DIR [--episodes 128]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from omegaconf import OmegaConf

from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.chunk_registry import load_chunk_policy
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.chunk_rl.trainer import EVAL_SEED_OFFSET, resolve_policy_dir
from vla_rl.training.sft.evaluate_chunks import evaluate_chunk_policy

MODES = {"greedy": True, "sampled": False}
"""Mode name -> ``deterministic``."""


def run_config(run_dir: Path) -> VLARLConfig:
    saved = OmegaConf.load(run_dir / "config.yaml")
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(VLARLConfig), saved))


def load_with_exploration(cfg: VLARLConfig, directory: Path) -> ChunkPolicy:
    policy = load_chunk_policy(cfg.policy.name, directory)
    if cfg.policy.exploration:
        policy.set_exploration(**dict(cfg.policy.exploration))
    return policy.eval()


def evaluate_start_and_end(run_dir: Path, episodes: int, split: str = "train") -> dict[str, dict[str, float]]:
    """``{"SFT" | "RL": {"greedy" | "sampled": success rate}}`` over ``episodes`` episodes each."""
    cfg = run_config(run_dir)
    torch.set_num_threads(cfg.torch_num_threads)
    results: dict[str, dict[str, float]] = {}
    for label, source in (("SFT", cfg.policy.init_from), ("RL", run_dir)):
        policy = load_with_exploration(cfg, resolve_policy_dir(source))
        results[label] = {}
        for mode, deterministic in MODES.items():
            evaluation = evaluate_chunk_policy(
                policy,
                cfg.env,
                episodes,
                cfg.algorithm.execute_steps,
                seed=cfg.seed + EVAL_SEED_OFFSET,
                deterministic=deterministic,
                temperature=cfg.algorithm.temperature,
                split=split,
            )
            results[label][mode] = evaluation.success_rate
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=128)
    args = parser.parse_args()
    print(json.dumps(evaluate_start_and_end(args.run_dir, args.episodes), indent=1))


if __name__ == "__main__":
    main()
