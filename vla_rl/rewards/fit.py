"""Fit the learned reward model on labelled frames, and measure it on held-out episodes.

Loss per batch: binary cross-entropy of the success logit against the frame's success label
(positives weighted by the negatives-to-positives ratio of the training set, so a model that
calls every frame "not done" gains nothing), plus ``progress_weight`` times the cross-entropy of
the progress output against the soft progress label, on frames whose progress is labelled.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from vla_rl.data.image_shift import random_shift
from vla_rl.data.lerobot_format import open_dataset
from vla_rl.rewards.frames import LabelledFrames, labelled_frames, with_state_progress
from vla_rl.rewards.learned import LearnedRewardModel
from vla_rl.rewards.metrics import GOAL_DISTANCE_FIELDS, auroc, spearman, true_progress
from vla_rl.rewards.train_config import RewardTrainConfig

log = logging.getLogger(__name__)
METRICS_FILE = "metrics.json"
EVAL_BATCH = 512


@dataclass
class RewardModelQuality:
    """Held-out measurements of a reward model."""

    frames: int
    """Held-out frames scored."""
    episodes: int
    """Held-out episodes they came from."""
    success_auroc: float
    """AUROC of the success probability against the frames' success labels."""
    progress_spearman_labels: float
    """Spearman correlation of the progress output with the progress labels (successful episodes)."""
    progress_spearman_true: float | None
    """Spearman correlation with the true progress ``1 - d_t / d_0`` (tasks with a goal distance)."""


@dataclass
class FitResult:
    model: LearnedRewardModel
    train_frames: int
    train_time_s: float
    final_loss: float
    quality: RewardModelQuality | None


def load_frames(
    directories: list[str], cameras: list[str], progress_labels: str = "time", task: str = ""
) -> LabelledFrames:
    """Labelled frames of every episode of the datasets ``directories`` (progress labelled as
    ``RewardTrainConfig.progress_labels`` says)."""
    episodes = [episode for d in directories for episode in open_dataset(d).episodes()]
    frames = labelled_frames(episodes, cameras)
    return with_state_progress(frames, task) if progress_labels == "task_state" else frames


def fit_reward_model(cfg: RewardTrainConfig, frames: LabelledFrames) -> tuple[LearnedRewardModel, float]:
    """Train a fresh model on ``frames``; returns it (eval mode) and the last logged loss."""
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    model = LearnedRewardModel(cfg.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step / cfg.steps, 1.0)))
    )
    positives = float(frames.success.sum())
    pos_weight = torch.tensor((len(frames) - positives) / max(positives, 1.0))
    model.train()
    loss_value = math.nan
    for step in tqdm(range(cfg.steps), desc="reward-train", unit="step", mininterval=5.0):
        rows = torch.randint(0, len(frames), (cfg.batch_size,), generator=generator)
        images = random_shift(frames.frames[rows], cfg.random_shift_px, generator)
        images = images[:, 0] if images.shape[1] == 1 else images
        success_logit, progress_logit = model(images, [frames.instructions[i] for i in rows.tolist()])
        loss = F.binary_cross_entropy_with_logits(success_logit, frames.success[rows], pos_weight=pos_weight)
        mask = frames.progress_mask[rows]
        if mask.any() and cfg.progress_weight > 0:
            progress_loss = F.binary_cross_entropy_with_logits(
                progress_logit[mask], frames.progress[rows][mask]
            )
            loss = loss + cfg.progress_weight * progress_loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == cfg.steps - 1:
            loss_value = loss.item()
    return model.eval(), loss_value


def score_frames(model: LearnedRewardModel, frames: LabelledFrames) -> tuple[np.ndarray, np.ndarray]:
    """(success probability, progress) of every frame, scored in batches."""
    success, progress = [], []
    for start in range(0, len(frames), EVAL_BATCH):
        rows = slice(start, start + EVAL_BATCH)
        p_success, p_progress = model.heads_out(frames.view_frames(rows), frames.instructions[rows])
        success.append(p_success.numpy())
        progress.append(p_progress.numpy())
    return np.concatenate(success), np.concatenate(progress)


def measure_quality(model: LearnedRewardModel, frames: LabelledFrames, task: str = "") -> RewardModelQuality:
    """Success AUROC and progress Spearman correlations of ``model`` on held-out ``frames``."""
    p_success, p_progress = score_frames(model, frames)
    mask = frames.progress_mask.numpy()
    true = None
    if task in GOAL_DISTANCE_FIELDS and frames.privileged is not None:
        true = spearman(p_progress, true_progress(task, frames.privileged, frames.episode.numpy()))
    return RewardModelQuality(
        frames=len(frames),
        episodes=int(frames.episode.max()) + 1,
        success_auroc=auroc(p_success, frames.success.numpy()),
        progress_spearman_labels=spearman(p_progress[mask], frames.progress.numpy()[mask]),
        progress_spearman_true=true,
    )


def train_reward_model(cfg: RewardTrainConfig) -> FitResult:
    """Load the datasets, fit, save the model into ``cfg.output_dir`` and measure it on
    ``cfg.eval_datasets``; ``metrics.json`` records the measurements and the settings."""
    torch.set_num_threads(cfg.torch_num_threads)
    frames = load_frames(cfg.datasets, cfg.model.cameras, cfg.progress_labels, cfg.task)
    log.info(
        "reward-train: %d frames, %.1f %% labelled done", len(frames), 100 * float(frames.success.mean())
    )
    start = time.perf_counter()
    model, loss = fit_reward_model(cfg, frames)
    train_time_s = time.perf_counter() - start
    output = Path(cfg.output_dir)
    model.save_pretrained(output)
    quality = None
    if cfg.eval_datasets:
        held_out = load_frames(cfg.eval_datasets, cfg.model.cameras, cfg.progress_labels, cfg.task)
        quality = measure_quality(model, held_out, cfg.task)
    record = {
        "train_frames": len(frames),
        "train_time_s": train_time_s,
        "final_loss": loss,
        "quality": asdict(quality) if quality else None,
        "config": asdict(cfg),
    }
    (output / METRICS_FILE).write_text(json.dumps(record, indent=2))
    return FitResult(model, len(frames), train_time_s, loss, quality)
