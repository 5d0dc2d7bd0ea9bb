"""``resize_with_pad``: aspect ratio kept, image in the bottom-right corner, padding top and left."""

from __future__ import annotations

import pytest
import torch

from vla_rl.policies.image_resize import resize_with_pad


def test_a_wide_image_that_fits_is_padded_on_top_only() -> None:
    image = torch.arange(8.0).reshape(1, 1, 2, 4)  # height 2, width 4
    out = resize_with_pad(image, width=4, height=4, pad_value=-1.0)
    assert out.shape == (1, 1, 4, 4)
    assert (out[0, 0, :2] == -1).all()
    torch.testing.assert_close(out[0, 0, 2:], image[0, 0])


def test_halving_averages_two_by_two_blocks_and_pads_the_left() -> None:
    image = torch.arange(32.0).reshape(1, 1, 8, 4)  # height 8, width 4 -> ratio 2 -> 4 x 2
    out = resize_with_pad(image, width=4, height=4)
    assert out.shape == (1, 1, 4, 4)
    assert (out[0, 0, :, :2] == 0).all()
    blocks = image[0, 0].reshape(4, 2, 2, 2).mean(dim=(1, 3))  # bilinear at half size: block means
    torch.testing.assert_close(out[0, 0, :, 2:], blocks)


def test_sides_are_truncated_not_rounded() -> None:
    image = torch.zeros(2, 3, 10, 7)  # ratio max(7/4, 10/4) = 2.5 -> 4 x int(2.8) = 4 x 2
    out = resize_with_pad(image, width=4, height=4, pad_value=5.0)
    assert out.shape == (2, 3, 4, 4)
    assert (out[..., :2] == 5.0).all() and (out[..., 2:] == 0.0).all()


def test_a_batch_of_images_is_required() -> None:
    with pytest.raises(ValueError, match=r"\[N, C, H, W\]"):
        resize_with_pad(torch.zeros(3, 8, 8), 4, 4)
