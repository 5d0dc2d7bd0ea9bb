"""SFT a tiny LeRobot pi0 on a LeRobot dataset with LeRobot's own training code (``lerobot_train.train``).

Runs with the LeRobot reference venv's python (``.venv-lerobot``)::

    python tests/lerobot/lerobot_pi0_sft.py --openpi OPENPI_CHECKOUT --dataset DATASET_ROOT --out OUT \\
        --steps 2000 --batch-size 16

``DATASET_ROOT`` is a LeRobot dataset on disk (for example one that ``vla-rl collect`` wrote in v3.0).
As ``make_pi_fixtures.py`` does, the script applies openpi's ``transformers_replace`` files to a temporary
copy of the venv's ``transformers`` (LeRobot 0.4's pi0 needs them), gives LeRobot's model construction
reduced sizes (``shrink_lerobot``: 2 layers, Gemma widths 32 / 16, a 2-layer SigLIP on
``--image-side`` pixel images) and answers the processor's hub tokenizer with a local word-level one
over the dataset's task strings. Everything else is LeRobot's: ``PI0Config`` (with the chunk, image
resolution and optimiser settings given here), ``make_dataset`` (its ``LeRobotDataset``, video decoding
and action-chunk windows), ``make_policy``, ``make_pre_post_processors`` with the dataset's statistics,
its optimiser and scheduler presets, its training loop and its checkpoint saving.

It writes:

* ``OUT/train/``: LeRobot's output directory; the policy folder a user would import is
  ``OUT/train/checkpoints/last/pretrained_model`` (``config.json``, ``model.safetensors`` and the
  pre/post-processor files with the dataset's normalisation statistics);
* ``OUT/tokenizer/``: the local tokenizer (``policy.tokenizer_dir`` on the vla-rl side);
* ``OUT/sft.npz``: the training loss and learning rate at every optimiser step.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from make_pi_fixtures import HUB_TOKENIZER, build_tokenizer, patched_transformers, shrink_lerobot


def dataset_tasks(root: Path) -> list[str]:
    """The task strings of a LeRobot dataset (v3.0 ``meta/tasks.parquet`` or v2.1 ``meta/tasks.jsonl``)."""
    import json

    import pandas as pd

    parquet = root / "meta" / "tasks.parquet"
    if parquet.is_file():
        return [str(task) for task in pd.read_parquet(parquet).index]
    lines = (root / "meta" / "tasks.jsonl").read_text().splitlines()
    return [json.loads(line)["task"] for line in lines if line.strip()]


def use_local_tokenizer(tokenizer: Any) -> None:
    """Answer LeRobot's tokenizer step's request for the hub tokenizer with ``tokenizer``."""
    from lerobot.processor import tokenizer_processor

    class LocalTokenizer:
        @staticmethod
        def from_pretrained(name: str, *args: Any, **kwargs: Any) -> Any:
            if name != HUB_TOKENIZER:
                raise ValueError(f"unexpected tokenizer {name!r}")
            return tokenizer

    tokenizer_processor.AutoTokenizer = LocalTokenizer


def record_losses(train_module: Any) -> list[tuple[float, float]]:
    """Wrap LeRobot's ``update_policy`` so that each optimiser step's (loss, learning rate) is kept."""
    history: list[tuple[float, float]] = []
    update_policy = train_module.update_policy

    def recorded(train_metrics: Any, *args: Any, **kwargs: Any) -> Any:
        train_metrics, output = update_policy(train_metrics, *args, **kwargs)
        history.append((float(train_metrics.loss.val), float(train_metrics.lr.val)))
        return train_metrics, output

    train_module.update_policy = recorded
    return history


def train(args: argparse.Namespace, tokenizer: Any) -> list[tuple[float, float]]:
    from lerobot.configs.default import DatasetConfig, WandBConfig
    from lerobot.configs.train import TrainPipelineConfig
    from lerobot.policies.pi0 import modeling_pi0
    from lerobot.policies.pi0.configuration_pi0 import PI0Config
    from lerobot.scripts import lerobot_train

    shrink_lerobot(modeling_pi0, len(tokenizer), image_side=args.image_side)
    use_local_tokenizer(tokenizer)
    policy = PI0Config(
        chunk_size=args.chunk,
        n_action_steps=args.chunk,
        image_resolution=(args.image_side, args.image_side),
        optimizer_lr=args.lr,
        scheduler_warmup_steps=args.warmup_steps,
        scheduler_decay_steps=args.steps,
        scheduler_decay_lr=args.lr / 10,
        device="cpu",
        push_to_hub=False,
    )
    cfg = TrainPipelineConfig(
        dataset=DatasetConfig(
            repo_id=f"local/{args.dataset.name}", root=str(args.dataset), video_backend=args.video_backend
        ),
        policy=policy,
        output_dir=args.out / "train",
        seed=args.seed,
        num_workers=args.num_workers,
        batch_size=args.batch_size,
        steps=args.steps,
        eval_freq=0,
        log_freq=args.log_every,
        save_freq=args.steps,
        wandb=WandBConfig(enable=False),
    )
    history = record_losses(lerobot_train)
    lerobot_train.train(cfg)
    return history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openpi", type=Path, required=True, help="an openpi checkout (its src/ tree)")
    parser.add_argument("--dataset", type=Path, required=True, help="a LeRobot dataset's root folder")
    parser.add_argument("--out", type=Path, required=True, help="output folder (must not hold train/)")
    parser.add_argument("--steps", type=int, required=True, help="optimiser steps (the SFT budget)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--chunk", type=int, default=10, help="pi0's chunk_size (= n_action_steps)")
    parser.add_argument("--image-side", type=int, default=64, help="pi0's image_resolution (square)")
    parser.add_argument("--lr", type=float, default=5e-4, help="peak rate of LeRobot's cosine schedule")
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-workers", type=int, default=0, help="LeRobot's data-loading workers")
    parser.add_argument(
        "--video-backend",
        default="pyav",
        help="LeRobot's video decoder (torchcodec needs FFmpeg's libraries)",
    )
    parser.add_argument("--log-every", type=int, default=50)
    args = parser.parse_args()
    # LeRobot's config validation reads the process's own arguments for `--policy.path`.
    sys.argv = sys.argv[:1]
    if "transformers" in sys.modules:
        raise SystemExit("transformers was imported before openpi's files could be applied")

    with tempfile.TemporaryDirectory(prefix="openpi_transformers_") as workdir:
        sys.path.insert(0, str(patched_transformers(args.openpi.resolve(), Path(workdir))))
        import torch

        torch.set_num_threads(1)
        args.out.mkdir(parents=True, exist_ok=True)
        tokenizer = build_tokenizer(args.out / "tokenizer", dataset_tasks(args.dataset))
        history = train(args, tokenizer)
    losses, rates = (np.array(values, dtype=np.float64) for values in zip(*history, strict=True))
    np.savez(args.out / "sft.npz", loss=losses, lr=rates)
    folder = args.out / "train" / "checkpoints" / "last" / "pretrained_model"
    first, last = losses[:10].mean(), losses[-10:].mean()
    print(f"{len(losses)} steps, loss {first:.4f} (first 10) -> {last:.4f} (last 10)")
    print(f"policy folder: {folder}")


if __name__ == "__main__":
    main()
