"""Typed configuration of ``vla-rl reward-train`` (``configs/reward_train.yaml``) and its validation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from vla_rl.config.structured import Check, compose_config_module, not_negative, positive, validate_structured
from vla_rl.rewards.learned import LearnedRewardConfig
from vla_rl.rewards.metrics import REMAINING_PATH_FIELDS

REWARD_TRAIN_CONFIG_NAME = "reward_train"


@dataclass
class RewardTrainConfig:
    """Fit the learned success/progress model on frames of recorded episodes."""

    datasets: list[str] = field(default_factory=list)
    """LeRobot dataset directories to train on: demonstrations and failed episodes alike
    (``vla-rl collect keep_failures=true``); every frame is labelled by ``vla_rl.rewards.frames``."""
    eval_datasets: list[str] = field(default_factory=list)
    """Held-out datasets: success AUROC and progress Spearman go to ``<output_dir>/metrics.json``."""
    task: str = ""
    """Task of the datasets; with a goal distance (``reach``, ``push``) the evaluation also ranks the
    predicted progress against the true progress ``1 - d_t / d_0`` from the privileged state."""
    model: LearnedRewardConfig = field(default_factory=LearnedRewardConfig)
    """Architecture (cameras, image size, widths)."""
    steps: int = 2000
    """Gradient steps."""
    batch_size: int = 256
    """Frames per gradient step."""
    learning_rate: float = 1e-3
    """AdamW learning rate (cosine decay to 0 over ``steps``)."""
    weight_decay: float = 1e-4
    """AdamW weight decay."""
    progress_weight: float = 1.0
    """Weight of the progress loss against the success loss."""
    progress_labels: str = "time"
    """Where progress labels come from. ``time``: frames of successful episodes, ``t / t_success``
    (all a demonstration gives). ``task_state``: every frame, failures included, from the recorded
    simulator state, ``1 - d_t / d_0`` of the path still to travel (tasks of
    ``vla_rl.rewards.metrics.REMAINING_PATH_FIELDS``; for simulated data)."""
    random_shift_px: int = 4
    """Training frames are shifted by up to this many pixels (edge padding), so the model does not
    key on exact pixel positions; 0 disables."""
    seed: int = 0
    """Seeds the split of batches, the augmentation and the initial weights."""
    output_dir: str = "runs/reward_models/${task}"
    """Directory the model (``save_pretrained`` layout) and ``metrics.json`` are written to."""
    torch_num_threads: int = 2
    """``torch.set_num_threads`` for training."""


REWARD_TRAIN_CHECKS: tuple[Check[RewardTrainConfig], ...] = (
    Check("datasets", lambda c: len(c.datasets) > 0, "name at least one dataset directory"),
    Check("model.cameras", lambda c: len(c.model.cameras) > 0, "name at least one camera"),
    Check("model.channels", lambda c: len(c.model.channels) > 0, "needs at least one convolution"),
    Check(
        "model.backbone", lambda c: c.model.backbone in ("cnn", "pretrained"), "must be 'cnn' or 'pretrained'"
    ),
    Check(
        "model.backbone_path",
        lambda c: c.model.backbone != "pretrained" or bool(c.model.backbone_path),
        "must name the local CLIP/SigLIP folder of the pretrained backbone",
    ),
    *positive("model.image_size", "steps", "batch_size", "learning_rate", "torch_num_threads"),
    *not_negative("progress_weight", "random_shift_px"),
    Check(
        "progress_labels",
        lambda c: c.progress_labels in ("time", "task_state"),
        "must be 'time' or 'task_state'",
    ),
    Check(
        "task",
        lambda c: c.progress_labels != "task_state" or c.task in REMAINING_PATH_FIELDS,
        f"progress_labels=task_state needs one of {sorted(REMAINING_PATH_FIELDS)}",
    ),
    Check("output_dir", lambda c: bool(c.output_dir), "must name a directory"),
)


def validate_reward_train_config(raw: DictConfig | dict[str, Any]) -> RewardTrainConfig:
    """Merge ``raw`` into ``RewardTrainConfig`` (unknown keys and wrong types fail) and check values."""
    return validate_structured(RewardTrainConfig, raw, REWARD_TRAIN_CHECKS)


def compose_reward_train_config(overrides: Sequence[str] = ()) -> RewardTrainConfig:
    """``configs/reward_train.yaml`` plus Hydra-syntax ``overrides``, validated."""
    return validate_reward_train_config(compose_config_module(REWARD_TRAIN_CONFIG_NAME, overrides))
