"""The reward-model contract: batched camera frames and instructions in, one score per frame out.

Frames are what the environment already renders: uint8 tensors ``[B, H, W, 3]`` (or
``[B, V, H, W, 3]`` for a model that reads ``V`` cameras at once). Every model is a
``torch.nn.Module``, scores a whole batch in one call, and gives the same score to a frame
whether it is scored alone or inside a batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import torch
from torch import nn


class RewardModelError(ValueError):
    """Bad input to a reward model (wrong frame shape or type, missing or empty prompt)."""


class RewardModel(nn.Module, ABC):
    """Scores how far each frame is towards completing its instruction.

    ``score`` is the model's reward (higher is closer to done). Models that estimate the
    probability that the task is done also implement ``success_probability``; models that can
    compare two frames implement ``pairwise_progress``.
    """

    num_views: int = 1
    """Cameras one sample holds: 1 takes ``[B, H, W, 3]``, more take ``[B, V, H, W, 3]``."""
    image_size: int | None = None
    """Height and width the model requires, or ``None`` when it resizes any frame itself."""

    @abstractmethod
    def score(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        """float32 ``[B]``: the reward of each frame for its instruction."""

    def score_during_training(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        """``score`` of frames met while training a policy. Models that normalise their scores with
        running statistics also fold these frames into them (after scoring them)."""
        return self.score(frames, instructions)

    def score_and_success_during_training(
        self, frames: torch.Tensor, instructions: Sequence[str]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(``score_during_training``, ``success_probability``) of the same frames; models whose two
        outputs come from one forward pass override it to run that pass once."""
        return self.score_during_training(frames, instructions), self.success_probability(
            frames, instructions
        )

    def success_probability(self, frames: torch.Tensor, instructions: Sequence[str]) -> torch.Tensor:
        """float32 ``[B]`` in [0, 1]: the probability that each frame shows the task done."""
        raise NotImplementedError(f"{type(self).__name__} does not estimate success")

    def pairwise_progress(
        self, earlier: torch.Tensor, later: torch.Tensor, instructions: Sequence[str]
    ) -> torch.Tensor:
        """float32 ``[B]`` in [0, 1]: the probability that ``later`` is closer to done than ``earlier``."""
        raise NotImplementedError(f"{type(self).__name__} does not compare frames")

    def check_inputs(self, frames: torch.Tensor, instructions: Sequence[str]) -> None:
        """Raise ``RewardModelError`` unless ``frames`` and ``instructions`` fit this model."""
        check_frames(frames, self.num_views, self.image_size)
        check_instructions(instructions, frames.shape[0])


def check_frames(frames: torch.Tensor, num_views: int = 1, image_size: int | None = None) -> None:
    """Frames must be uint8 RGB, ``[B, H, W, 3]`` (one view) or ``[B, V, H, W, 3]`` (``V`` views)."""
    if not isinstance(frames, torch.Tensor):
        raise RewardModelError(f"frames must be a torch.Tensor, got {type(frames).__name__}")
    if frames.dtype != torch.uint8:
        raise RewardModelError(f"frames must be uint8 RGB, got dtype {frames.dtype}")
    expected = 4 if num_views == 1 else 5
    layout = "[B, H, W, 3]" if num_views == 1 else f"[B, {num_views}, H, W, 3]"
    if frames.ndim != expected or frames.shape[-1] != 3:
        raise RewardModelError(f"frames must be {layout}, got shape {tuple(frames.shape)}")
    if num_views > 1 and frames.shape[1] != num_views:
        raise RewardModelError(f"the model reads {num_views} cameras, frames hold {frames.shape[1]}")
    height, width = frames.shape[-3], frames.shape[-2]
    if image_size is not None and (height, width) != (image_size, image_size):
        raise RewardModelError(
            f"the model was built for {image_size}x{image_size} frames, got {height}x{width}; "
            f"render the reward camera at env.image_size={image_size}"
        )


def check_instructions(instructions: Sequence[str], batch_size: int) -> None:
    """One non-empty instruction string per frame."""
    if isinstance(instructions, str):
        raise RewardModelError("instructions must be a sequence of strings, one per frame, not one string")
    if len(instructions) != batch_size:
        raise RewardModelError(f"{batch_size} frames but {len(instructions)} instructions")
    for i, text in enumerate(instructions):
        if not isinstance(text, str) or not text.strip():
            raise RewardModelError(f"instruction {i} is empty: every frame needs the task it is scored for")
