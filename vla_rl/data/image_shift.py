"""Random-shift augmentation of camera images (DrQ, Kostrikov et al. 2020; Yarats et al. 2021).

DrQ pads each image by ``k`` pixels, repeating its edge pixels, and crops an image of the original size
at a random corner, so the content moves by up to ``k`` pixels in each direction. Cropping the padded
image at corner ``(oy, ox)`` equals reading the original at rows ``clamp(y + oy - k, 0, H - 1)`` and
columns ``clamp(x + ox - k, 0, W - 1)``; :func:`random_shift` indexes that way, so uint8 images stay
uint8 and no padded copy is made.
"""

from __future__ import annotations

import torch

from vla_rl.envs.base import Observation

IMAGE_PREFIX = "rgb_"
"""Observation keys that start with this are camera images [B, H, W, 3]."""


def random_shift(images: torch.Tensor, max_shift_px: int, generator: torch.Generator) -> torch.Tensor:
    """``images`` [B, ..., H, W, C] with each sample moved by its own random offset of up to
    ``max_shift_px`` pixels along H and W; the border it uncovers repeats the edge pixels. All images of
    one sample (the axes between B and H) move together.

    The offsets are drawn with ``generator`` as ``randint(0, 2 * max_shift_px + 1, (B, 2))``, (row,
    column) corners of the crop: a corner ``o`` moves the content by ``max_shift_px - o`` pixels
    (towards larger indices when positive). ``max_shift_px`` 0 returns ``images`` and draws nothing.
    """
    if max_shift_px < 0:
        raise ValueError(f"max_shift_px must be >= 0, got {max_shift_px}")
    if max_shift_px == 0:
        return images
    if images.dim() < 4:
        raise ValueError(f"images must be [B, ..., H, W, C], got shape {tuple(images.shape)}")
    batch, height, width, channels = images.shape[0], *images.shape[-3:]
    corners = torch.randint(
        0, 2 * max_shift_px + 1, (batch, 2), generator=generator, device=generator.device
    ).to(images.device)
    rows = torch.arange(height, device=images.device)[None, :] + corners[:, :1] - max_shift_px
    cols = torch.arange(width, device=images.device)[None, :] + corners[:, 1:] - max_shift_px
    rows, cols = rows.clamp(0, height - 1), cols.clamp(0, width - 1)
    per_sample = images.reshape(batch, -1, height, width, channels)
    samples = torch.arange(batch, device=images.device)[:, None, None, None]
    views = torch.arange(per_sample.shape[1], device=images.device)[None, :, None, None]
    shifted = per_sample[samples, views, rows[:, None, :, None], cols[:, None, None, :]]
    return shifted.reshape(images.shape)


def shift_observation_images(obs: Observation, max_shift_px: int, generator: torch.Generator) -> Observation:
    """``obs`` with its ``rgb_*`` images [B, H, W, 3] shifted by :func:`random_shift`, one offset per
    sample shared by all its cameras (as if they were stacked along channels, which is how the encoders
    read them); the other entries are the same objects. No image key, or ``max_shift_px`` 0: ``obs``
    itself, and nothing is drawn."""
    keys = [key for key in obs if key.startswith(IMAGE_PREFIX)]
    if not keys or max_shift_px == 0:
        return obs
    shifted = random_shift(torch.stack([obs[key] for key in keys], dim=1), max_shift_px, generator)
    return {**obs, **{key: shifted[:, index] for index, key in enumerate(keys)}}
