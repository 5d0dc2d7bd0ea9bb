"""Resizing camera images to a model's input size while keeping their aspect ratio, as LeRobot's
policies do (pi0 / pi0.5 centre the image, SmolVLA puts it in the bottom-right corner): one helper
for every family that loads their folders."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def resize_with_pad(
    images: torch.Tensor, height: int, width: int, *, pad_value: float = 0.0, centred: bool = False
) -> torch.Tensor:
    """float [N, C, H, W] -> [N, C, height, width]: scaled by one factor (bilinear, no antialiasing,
    corners not aligned) so the image fits, each side truncated to an integer, then padded with
    ``pad_value``: on the top and the left (the image in the bottom-right corner), or ``centred``
    (an odd remainder goes to the bottom and the right)."""
    if images.ndim != 4:
        raise ValueError(f"expected images [N, C, H, W], got shape {tuple(images.shape)}")
    old_height, old_width = images.shape[2:]
    ratio = max(old_width / width, old_height / height)
    new_height, new_width = int(old_height / ratio), int(old_width / ratio)
    resized = F.interpolate(images, size=(new_height, new_width), mode="bilinear", align_corners=False)
    pad_height, pad_width = max(0, height - new_height), max(0, width - new_width)
    top, left = (pad_height // 2, pad_width // 2) if centred else (pad_height, pad_width)
    return F.pad(resized, (left, pad_width - left, top, pad_height - top), value=pad_value)
