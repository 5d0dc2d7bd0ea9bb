"""Padding for flow models: padded steps of demonstrated chunks made harmless, and vectors padded
to the model's fixed widths (``pad_last_dim``).

A flow model denoises the whole chunk jointly (pi0's action tokens attend to each other; the flow
MLP reads the flattened chunk), so a padded step's value would leak into the real steps' inputs
even with its loss masked out. Padded steps are therefore overwritten with the last real action
before it (the robot holds still after the episode ends), as LeRobot does, and zeros when no real
step precedes them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vla_rl.config.structured import ConfigError


def fill_padded_steps(action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> torch.Tensor:
    """``action_chunk`` [N, T, A], ``chunk_mask`` bool [N, T] -> chunk with padded steps filled."""
    steps = torch.arange(action_chunk.shape[1], device=action_chunk.device).expand_as(chunk_mask)
    last_real = torch.where(chunk_mask, steps, torch.full_like(steps, -1)).cummax(dim=1).values
    filled = action_chunk.gather(1, last_real.clamp(min=0)[..., None].expand_as(action_chunk))
    return torch.where((last_real >= 0)[..., None], filled, torch.zeros_like(filled))


def pad_last_dim(values: torch.Tensor, size: int, key: str = "policy") -> torch.Tensor:
    """Zero-pad the last dim to the model's padded ``size``; ``ConfigError`` naming the config
    ``key`` that set the width if it is wider."""
    if values.shape[-1] > size:
        raise ConfigError(
            f"config key '{key}': {values.shape[-1]} values do not fit the model's padded size {size}"
        )
    return F.pad(values, (0, size - values.shape[-1]))
