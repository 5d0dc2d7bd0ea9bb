"""Reward-model scoring throughput, and what scoring costs end-to-end PPO.

Scoring: frames/s at batch 64 for frames of 64x64 and 224x224, for each reward-model type built
small (random weights, the sizes printed below), median of ``--repeats`` timed calls after a
warm-up. Overhead: PPO on ``reach`` with the front camera rendered in every row, so the rows
differ only in the reward layer; env-steps/s of the training loop (collection + update, no
evaluation), median over ``--repeats`` runs, and the ratio to the environment-reward row.

    python -m benchmarks.reward_scoring
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.common import machine_line, median_rate
from benchmarks.tiny_judge import build_tiny_judge
from benchmarks.tiny_reward_models import build_tiny_contrastive
from vla_rl.rewards import build_reward_model
from vla_rl.rewards.learned import LearnedRewardConfig, LearnedRewardModel

BATCH = 64
FRAME_SIZES = (64, 224)
INSTRUCTION = "move the gripper to the target"


def small_models(root: Path) -> dict[str, tuple[str, Callable[[int], torch.nn.Module]]]:
    """name -> (description, build(frame_size))."""

    def learned(size: int) -> torch.nn.Module:
        root_size = root / f"learned_{size}"
        LearnedRewardModel(LearnedRewardConfig(image_size=size)).save_pretrained(root_size)
        return build_reward_model("learned", str(root_size))

    clip = build_tiny_contrastive(root / "clip", "clip", 224, 32, hidden_size=256, num_layers=4)
    siglip = build_tiny_contrastive(root / "siglip", "siglip", 224, 16, hidden_size=256, num_layers=4)
    judge = build_tiny_judge(
        root / "judge", image_size=224, patch_size=16, hidden_size=256, vision_hidden_size=128, num_heads=4
    )
    negative = {"negative_prompt": "the gripper is far from the target"}
    return {
        "learned": ("CNN [16, 32, 32], frames at their own size", learned),
        "contrastive_clip": (
            "CLIP 224 px, patch 32, width 256, 4 layers, pos/neg contrast",
            lambda size: build_reward_model("contrastive", str(clip), negative),
        ),
        "contrastive_siglip": (
            "SigLIP 224 px, patch 16, width 256, 4 layers",
            lambda size: build_reward_model("contrastive", str(siglip)),
        ),
        "vlm_judge": (
            "PaliGemma 224 px, patch 16 (196 image tokens), vision 128 / text 256 wide, yes/no",
            lambda size: build_reward_model("vlm_judge", str(judge)),
        ),
    }


def scoring_rates(root: Path, repeats: int) -> None:
    print(f"\nscoring throughput, batch {BATCH}, frames/s (median of {repeats})")
    print(f"{'model':<20} {'64x64':>10} {'224x224':>10}  size")
    for name, (description, build) in small_models(root).items():
        rates = []
        for size in FRAME_SIZES:
            model = build(size)
            frames = torch.randint(0, 256, (BATCH, size, size, 3), dtype=torch.uint8)
            instructions = [INSTRUCTION] * BATCH
            model.score(frames, instructions)  # warm-up (caches the prompt's text embedding)

            def score_once() -> int:
                model.score(frames, instructions)  # noqa: B023 - timed immediately
                return BATCH

            rates.append(median_rate(score_once, repeats)[0])
        print(f"{name:<20} {rates[0]:>10,.0f} {rates[1]:>10,.0f}  {description}", flush=True)


def training_rate(overrides: list[str], run_dir: Path, env_steps: int) -> float:
    from vla_rl.config import compose_train_config
    from vla_rl.training.runner import Trainer

    cfg = compose_train_config(
        [
            "env.cameras=[front]",
            f"total_env_steps={env_steps}",
            "max_minutes=0",
            "eval.num_episodes=0",
            "logger.progress_bar=false",
            "logger.tensorboard=false",
            "logger.wandb_mode=disabled",
            f"run_dir={run_dir}",
            *overrides,
        ]
    )
    trainer = Trainer(cfg)
    try:
        start = time.perf_counter()
        result = trainer.train()
        return result.env_steps / (time.perf_counter() - start)
    finally:
        trainer.close()


def training_overhead(root: Path, repeats: int, env_steps: int) -> None:
    learned = root / "learned_64"
    rows = {
        "environment reward (camera rendered, not scored)": [],
        "learned, every step": ["reward=learned", f"reward.path={learned}", "reward.cameras=[front]"],
        "learned, every step, worker thread": [
            "reward=learned",
            f"reward.path={learned}",
            "reward.cameras=[front]",
            "reward.worker=true",
        ],
        "contrastive CLIP, every 5 steps": [
            "reward=contrastive",
            f"reward.path={root / 'clip'}",
            "reward.options.negative_prompt='the gripper is far from the target'",
            "reward.frequency=every_k",
            "reward.every_k=5",
        ],
        "VLM judge, episode end": [
            "reward=vlm_judge",
            f"reward.path={root / 'judge'}",
        ],
    }
    print(f"\nPPO on reach, 64 worlds, front camera 64x64, {env_steps:,} env steps, median of {repeats}")
    base = None
    for row, (name, overrides) in enumerate(rows.items()):
        rates = [training_rate(overrides, root / "runs" / f"row{row}_{i}", env_steps) for i in range(repeats)]
        rate = statistics.median(rates)
        base = base or rate
        print(f"{name:<52} {rate:>8,.0f} env-steps/s   ratio {rate / base:.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env-steps", type=int, default=40_960)
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--skip-scoring", action="store_true", help="build the models, time training only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import transformers

    transformers.logging.disable_progress_bar()
    print(f"machine: {machine_line()}; one torch thread")
    with tempfile.TemporaryDirectory(prefix="vla_rl_reward_scoring_") as tmp:
        root = Path(tmp)
        if args.skip_scoring:
            small_models(root)["learned"][1](64)  # the training rows load it; the others are built
        else:
            scoring_rates(root, args.repeats)
        if not args.skip_training:
            training_overhead(root, args.repeats, args.env_steps)


if __name__ == "__main__":
    main()
