"""OpenVLA's image steps (letterbox, resize, crop, normalise) against values worked out by hand."""

import numpy as np
import pytest
import torch
from PIL import Image

from vla_rl.policies.vla.openvla_images import (
    PrismaticImageSettings,
    letterbox,
    preprocess_image,
    resize_and_crop,
)


def settings(size: int, strategy: str = "letterbox", towers: int = 1) -> PrismaticImageSettings:
    return PrismaticImageSettings(
        resize_strategy=strategy,
        sizes=[size] * towers,
        interpolations=["bicubic"] * towers,
        means=[[0.5, 0.5, 0.5], [0.485, 0.456, 0.406]][:towers],
        stds=[[0.5, 0.5, 0.5], [0.229, 0.224, 0.225]][:towers],
    )


def test_letterbox_pads_the_short_side_with_the_mean_colour() -> None:
    image = np.full((2, 4, 3), 255, dtype=np.uint8)  # 2 rows, 4 columns
    padded = np.asarray(letterbox(Image.fromarray(image), (127, 127, 127)))
    assert padded.shape == (4, 4, 3)  # one row above and one below
    assert (padded[[0, 3]] == 127).all() and (padded[1:3] == 255).all()


def test_letterbox_odd_difference_pads_int_half() -> None:
    image = Image.fromarray(np.zeros((3, 4, 3), dtype=np.uint8))
    assert letterbox(image, (127, 127, 127)).size == (4, 3)  # int(1 / 2) = 0 rows each side


def test_preprocess_normalises_after_letterbox() -> None:
    image = np.full((2, 4, 3), 255, dtype=np.uint8)
    pixels = preprocess_image(image, settings(4))
    # (x / 255 - 0.5) / 0.5: 255 -> 1, the letterbox colour 127 -> 127 / 127.5 - 1
    assert pixels.shape == (3, 4, 4)
    assert pixels[:, 1:3].flatten().tolist() == pytest.approx([1.0] * 24)
    assert pixels[:, 0].flatten().tolist() == pytest.approx([127 / 127.5 - 1] * 12)


def test_resize_shorter_side_then_centre_crop() -> None:
    image = Image.fromarray(np.zeros((6, 10, 3), dtype=np.uint8))
    out = resize_and_crop(image, 3, naive=False, resample=Image.Resampling.BICUBIC)
    assert out.size == (3, 3)  # 6x10 -> 3x5 (int(3 * 10 / 6)) -> centre 3x3


def test_resize_is_pils_bicubic() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    expected = np.asarray(Image.fromarray(image).resize((4, 4), Image.Resampling.BICUBIC)) / 255.0
    pixels = preprocess_image(image, settings(4))
    assert np.abs(pixels.permute(1, 2, 0).numpy() - (expected - 0.5) / 0.5).max() < 1e-6


def test_fused_towers_stack_along_channels() -> None:
    image = np.full((4, 4, 3), 255, dtype=np.uint8)
    pixels = preprocess_image(image, settings(4, towers=2))
    assert pixels.shape == (6, 4, 4)
    expected_second = (1.0 - torch.tensor([0.485, 0.456, 0.406])) / torch.tensor([0.229, 0.224, 0.225])
    assert pixels[3:, 0, 0].tolist() == pytest.approx(expected_second.tolist(), abs=1e-6)
