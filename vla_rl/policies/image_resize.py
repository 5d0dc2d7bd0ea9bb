"""Resizing camera images to a model's input size while keeping their aspect ratio, as LeRobot's
policies do (pi0 / pi0.5 centre the image, SmolVLA puts it in the bottom-right corner), and as openpi's
transforms do with PIL on uint8 frames (``resize_with_pad_pil``): one place for every family that loads
their folders."""

from __future__ import annotations

import numpy as np
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


def resize_with_pad_pil(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """uint8 [N, H, W, C] -> [N, height, width, C] as openpi's ``ResizeImages`` does it: unchanged when
    already that size, else each frame scaled by one factor with PIL's bilinear filter (which
    antialiases when shrinking), each side truncated to an integer, and pasted on black at
    ``int(remainder / 2)`` from the top and the left."""
    if frames.shape[-3:-1] == (height, width):
        return frames
    from PIL import Image  # the vla extra's (openpi exports only)

    old_height, old_width = frames.shape[-3:-1]
    ratio = max(old_width / width, old_height / height)
    new_height, new_width = int(old_height / ratio), int(old_width / ratio)
    top, left = max(0, int((height - new_height) / 2)), max(0, int((width - new_width) / 2))
    out = np.zeros((len(frames), height, width, frames.shape[-1]), dtype=np.uint8)
    for index, frame in enumerate(frames):
        resized = Image.fromarray(frame).resize((new_width, new_height), resample=Image.BILINEAR)
        out[index, top : top + new_height, left : left + new_width] = np.asarray(resized)
    return out
