"""The augmentation used while fitting the learned reward model."""

from __future__ import annotations

import torch

from vla_rl.rewards.fit import random_shift


def test_random_shift_moves_all_views_of_a_sample_together_by_at_most_k() -> None:
    images = torch.zeros(8, 2, 16, 16, 3, dtype=torch.uint8)
    images[:, 0, 8, 8] = 255  # one bright pixel in each view, at the same place
    images[:, 1, 8, 8] = 200
    generator = torch.Generator().manual_seed(0)
    shifted = random_shift(images, 3, generator)
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    moves = set()
    for sample in shifted:
        first = (sample[0, ..., 0] == 255).nonzero().tolist()
        second = (sample[1, ..., 0] == 200).nonzero().tolist()
        assert first == second and len(first) == 1  # same single pixel in both views
        row, col = first[0]
        assert abs(row - 8) <= 3 and abs(col - 8) <= 3
        moves.add((row, col))
    assert len(moves) > 1, "different samples are shifted differently"
    assert torch.equal(random_shift(images, 0, generator), images)
