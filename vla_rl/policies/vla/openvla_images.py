"""An OpenVLA folder's image preprocessing, from its ``preprocessor_config.json``.

The folder's own processor (``processing_prismatic.py``) does not import under ``transformers`` 5
(it imports names that moved), so the same steps are done here from the settings it saved:

1. ``letterbox`` (the default ``image_resize_strategy``): pad the shorter side symmetrically to a
   square (``int(difference / 2)`` pixels on each side) with the colour ``int(255 * mean)``;
2. per vision tower ``i`` (two for fused DINOv2 + SigLIP backbones): resize with PIL (``interpolations[i]``,
   bicubic for the published folders) so that the shorter side is ``input_sizes[i][-1]`` (both sides for
   ``resize-naive``), centre-crop to that square, scale to [0, 1] and normalise with ``means[i]`` /
   ``stds[i]``;
3. stack the towers' images along the channels (3 per tower).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from vla_rl.config.structured import ConfigError

PREPROCESSOR_FILE = "preprocessor_config.json"
RESIZE_STRATEGIES = ("letterbox", "resize-naive", "resize-crop")
INTERPOLATIONS = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR}


@dataclass(frozen=True)
class PrismaticImageSettings:
    """The settings of ``preprocessor_config.json`` that the steps read."""

    resize_strategy: str
    """``letterbox``, ``resize-naive`` or ``resize-crop``."""
    sizes: list[int]
    """Square side in pixels per vision tower."""
    interpolations: list[str]
    """PIL resampling per tower (``bicubic`` / ``bilinear``)."""
    means: list[list[float]]
    """Per tower, the RGB mean subtracted after scaling to [0, 1] (and the letterbox colour / 255)."""
    stds: list[list[float]]
    """Per tower, the RGB standard deviation divided by."""

    @classmethod
    def read(cls, folder: str | Path) -> PrismaticImageSettings:
        path = Path(folder) / PREPROCESSOR_FILE
        if not path.is_file():
            raise ConfigError(f"config key 'policy.init_from': {folder} has no {PREPROCESSOR_FILE}")
        raw = json.loads(path.read_text())
        sizes = [int(size[-1]) for size in raw.get("input_sizes") or [[3, 224, 224]]]
        interpolations = list(raw.get("interpolations") or ["bicubic"] * len(sizes))
        strategy = str(raw.get("image_resize_strategy", "letterbox"))
        unknown = [name for name in interpolations if name not in INTERPOLATIONS]
        if strategy not in RESIZE_STRATEGIES or unknown:
            raise ConfigError(
                f"config key 'policy.init_from': {path} asks for image_resize_strategy {strategy!r} and "
                f"interpolations {interpolations}; supported: {list(RESIZE_STRATEGIES)} and "
                f"{sorted(INTERPOLATIONS)}"
            )
        return cls(
            resize_strategy=strategy,
            sizes=sizes,
            interpolations=interpolations,
            means=[list(map(float, m)) for m in raw.get("means") or [[0.5, 0.5, 0.5]]],
            stds=[list(map(float, s)) for s in raw.get("stds") or [[0.5, 0.5, 0.5]]],
        )


def letterbox(image: Image.Image, fill: tuple[int, int, int]) -> Image.Image:
    """Pad to a square with ``fill``: ``int((side - w) / 2)`` columns and ``int((side - h) / 2)``
    rows on each side (one short of square when the difference is odd, as the reference does)."""
    width, height = image.size
    side = max(width, height)
    pad_x, pad_y = int((side - width) / 2), int((side - height) / 2)
    if pad_x == 0 and pad_y == 0:
        return image
    canvas = Image.new("RGB", (width + 2 * pad_x, height + 2 * pad_y), fill)
    canvas.paste(image, (pad_x, pad_y))
    return canvas


def resize_and_crop(image: Image.Image, size: int, naive: bool, resample: Image.Resampling) -> Image.Image:
    """Shorter side to ``size`` (both sides when ``naive``), then the centred ``size`` square."""
    width, height = image.size
    if naive:
        image = image.resize((size, size), resample)
    else:
        short, long = (width, height) if width <= height else (height, width)
        new_long = int(size * long / short)
        new_size = (size, new_long) if width <= height else (new_long, size)
        if new_size != (width, height):
            image = image.resize(new_size, resample)
    width, height = image.size
    top, left = int(round((height - size) / 2.0)), int(round((width - size) / 2.0))
    return image.crop((left, top, left + size, top + size))


def preprocess_image(image: np.ndarray, settings: PrismaticImageSettings) -> torch.Tensor:
    """uint8 [H, W, 3] -> float32 [3 * towers, S, S] (``S``: every tower's size must agree)."""
    picture = Image.fromarray(np.ascontiguousarray(image), mode="RGB")
    if settings.resize_strategy == "letterbox":
        picture = letterbox(picture, tuple(int(255 * value) for value in settings.means[0]))  # type: ignore[arg-type]
    towers = []
    for size, interpolation, mean, std in zip(
        settings.sizes, settings.interpolations, settings.means, settings.stds, strict=True
    ):
        resized = resize_and_crop(
            picture, size, settings.resize_strategy == "resize-naive", INTERPOLATIONS[interpolation]
        )
        pixels = torch.from_numpy(np.asarray(resized, dtype=np.uint8).copy()).permute(2, 0, 1).float() / 255.0
        mean_t = torch.tensor(mean, dtype=torch.float32)[:, None, None]
        std_t = torch.tensor(std, dtype=torch.float32)[:, None, None]
        towers.append((pixels - mean_t) / std_t)
    return torch.cat(towers, dim=0)


def preprocess_images(images: np.ndarray | torch.Tensor, settings: PrismaticImageSettings) -> torch.Tensor:
    """uint8 [N, H, W, 3] -> float32 [N, 3 * towers, S, S]."""
    array = images.cpu().numpy() if isinstance(images, torch.Tensor) else np.asarray(images)
    return torch.stack([preprocess_image(row.astype(np.uint8), settings) for row in array])
