"""``vla-rl reward-train [overrides...]``: fit a success/progress reward model on recorded episodes.

Overrides use Hydra syntax against ``configs/reward_train.yaml`` (``task=push
datasets=[datasets/push_demos,datasets/push_failures] eval_datasets=[datasets/push_heldout]
model.cameras=[front,wrist]``).
"""

from __future__ import annotations

import argparse


def add_reward_train_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``reward-train`` sub-command to a ``vla-rl`` sub-parser set."""
    parser = subparsers.add_parser(
        "reward-train", help="fit a success/progress reward model on demonstrations and failures"
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. task=push datasets=[DIR,...]")
    return parser


def reward_train_command(args: argparse.Namespace) -> int:
    """Train, save, print the held-out measurements."""
    from vla_rl.rewards.fit import train_reward_model
    from vla_rl.rewards.train_config import compose_reward_train_config

    cfg = compose_reward_train_config(list(args.overrides))
    result = train_reward_model(cfg)
    print(
        f"trained on {result.train_frames} frames in {result.train_time_s / 60:.2f} min "
        f"(final loss {result.final_loss:.4f}); model: {cfg.output_dir}"
    )
    if result.quality is not None:
        q = result.quality
        true = "n/a" if q.progress_spearman_true is None else f"{q.progress_spearman_true:.3f}"
        print(
            f"held-out ({q.episodes} episodes, {q.frames} frames): success AUROC {q.success_auroc:.3f}, "
            f"progress Spearman vs labels {q.progress_spearman_labels:.3f}, vs true progress {true}"
        )
    return 0
