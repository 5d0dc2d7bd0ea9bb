"""DrQ's random shift, checked on images small enough to write out by hand."""

from __future__ import annotations

import pytest
import torch

from vla_rl.data.image_shift import random_shift, shift_observation_images

SEED_OF_CORNER_0_2 = 23
"""``torch.randint(0, 3, (1, 2))`` draws the crop corner (row 0, column 2) from this seed."""


def test_corner_0_2_moves_a_3x3_image_down_and_left_by_one_repeating_its_edges() -> None:
    image = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=torch.uint8)[None, :, :, None]
    generator = torch.Generator().manual_seed(SEED_OF_CORNER_0_2)
    shifted = random_shift(image, 1, generator)
    # Padded by one pixel (edges repeated), cropped at row 0, column 2: the content moves one row
    # down and one column left; the top row repeats and the right column repeats.
    assert shifted[0, :, :, 0].tolist() == [[2, 3, 3], [2, 3, 3], [5, 6, 6]]
    assert shifted.dtype == torch.uint8


def test_a_marker_moves_by_k_minus_the_drawn_corner_and_all_views_move_together() -> None:
    k, batch = 2, 32
    images = torch.zeros(batch, 2, 8, 8, 3, dtype=torch.uint8)
    images[:, 0, 4, 4] = 255
    images[:, 1, 4, 4] = 100
    shifted = random_shift(images, k, torch.Generator().manual_seed(0))
    corners = torch.randint(0, 2 * k + 1, (batch, 2), generator=torch.Generator().manual_seed(0))
    for sample, (row, col) in zip(shifted, corners.tolist(), strict=True):
        for view, value in ((0, 255), (1, 100)):
            assert (sample[view, ..., 0] == value).nonzero().tolist() == [[4 + k - row, 4 + k - col]]
            assert int((sample[view] != 0).sum()) == 3  # one pixel, three channels
    assert len({tuple(c) for c in corners.tolist()}) > 1


def test_shift_observation_images_shifts_every_camera_alike_and_leaves_vectors() -> None:
    generator = torch.Generator().manual_seed(1)
    front = torch.arange(2 * 6 * 6 * 3, dtype=torch.int64).reshape(2, 6, 6, 3).to(torch.uint8)
    obs = {"rgb_front": front, "rgb_wrist": front.clone(), "proprio": torch.ones(2, 3)}
    shifted = shift_observation_images(obs, 3, generator)
    assert torch.equal(shifted["rgb_front"], shifted["rgb_wrist"])
    assert not torch.equal(shifted["rgb_front"], front)
    assert shifted["proprio"] is obs["proprio"]
    assert torch.equal(obs["rgb_front"], front), "the input is not changed in place"
    state = generator.get_state()
    assert shift_observation_images(obs, 0, generator) is obs
    assert shift_observation_images({"proprio": obs["proprio"]}, 3, generator)["proprio"] is obs["proprio"]
    assert torch.equal(generator.get_state(), state), "nothing is drawn when nothing is shifted"


def test_negative_shift_is_refused() -> None:
    with pytest.raises(ValueError, match="max_shift_px must be >= 0"):
        random_shift(torch.zeros(1, 4, 4, 3, dtype=torch.uint8), -1, torch.Generator())
