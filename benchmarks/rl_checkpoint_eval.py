"""Success of an RL run's start and end, greedy and as sampled with the run's own exploration.

RL trains the policy that samples (token temperature, Flow-SDE or Flow-Noise chains); the trainer's
evaluations run it greedily. This evaluates the SFT starting point and the run's last checkpoint
both ways, on the same episodes (seeds), with the exploration settings of the run applied to both.

    python -m benchmarks.rl_checkpoint_eval RUN_DIR [--episodes 128] [--worlds 16] [--modes sampled]
        [--seed 2]

``--worlds`` sets the evaluation's world count (``eval.num_envs``), and with it which episodes are
evaluated: runs that trained with different world counts are compared on the same episodes.
``--modes`` limits the evaluation to greedy or sampled actions (default: both). ``--seed`` evaluates
on the episodes another run seed would be judged on (default: the run's own). A run whose noise was
annealed (``policy.exploration_final``) samples the RL policy with the noise of its last checkpoint.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from vla_rl.training.checkpoint import resolve_policy_dir
from vla_rl.training.chunk_rl.config_load import load_rl_config_file
from vla_rl.training.chunk_rl.exploration_anneal import run_updates
from vla_rl.training.chunk_rl.trainer import evaluate_rl_policy, load_rl_policy

MODES = {"greedy": True, "sampled": False}
"""Mode name -> ``deterministic``."""


def evaluate_start_and_end(
    run_dir: Path,
    episodes: int,
    split: str = "train",
    worlds: int | None = None,
    modes: tuple[str, ...] = tuple(MODES),
    seed: int | None = None,
) -> dict[str, dict[str, float]]:
    """``{"SFT" | "RL": {mode: success rate}}`` over ``episodes`` episodes each, ``mode`` in
    ``modes`` (``"greedy"``, ``"sampled"``); ``worlds`` replaces the run's ``eval.num_envs`` and ``seed``
    its ``seed`` (which sets the evaluation episodes)."""
    cfg = load_rl_config_file(run_dir / "config.yaml", for_evaluation=True)
    if worlds is not None:
        cfg.eval.num_envs = worlds
    if seed is not None:
        cfg.seed = seed
    torch.set_num_threads(cfg.torch_num_threads)
    results: dict[str, dict[str, float]] = {}
    for label, source, update in (("SFT", cfg.policy.init_from, 0), ("RL", run_dir, None)):
        update = run_updates(cfg.policy, run_dir) if update is None else update
        policy = load_rl_policy(cfg, resolve_policy_dir(source), update).eval()
        results[label] = {
            mode: evaluate_rl_policy(policy, cfg, split, episodes, deterministic).success_rate
            for mode, deterministic in MODES.items()
            if mode in modes
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--worlds", type=int, default=None, help="evaluation worlds (default: the run's)")
    parser.add_argument("--modes", nargs="+", choices=tuple(MODES), default=list(MODES))
    parser.add_argument("--seed", type=int, default=None, help="judge on this seed's episodes")
    args = parser.parse_args()
    results = evaluate_start_and_end(
        args.run_dir, args.episodes, worlds=args.worlds, modes=tuple(args.modes), seed=args.seed
    )
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
