"""The pieces of LeRobot's pi0 / pi0.5 preprocessing and sampling loop, against numbers worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import torch

from vla_rl.policies.flow.chain import accumulated_denoising_times, denoising_times
from vla_rl.policies.flow.lerobot_pi0_model import LeRobotTimestepEmbedding
from vla_rl.policies.flow.pi_prompts import pi05_prompts, state_bins
from vla_rl.policies.image_resize import resize_with_pad


def test_accumulated_times_drift_as_float32_sums() -> None:
    times = accumulated_denoising_times(10)
    exact = denoising_times(10)
    assert times[0] == 1.0 and times[1] == np.float32(0.9)
    assert times[2] == np.float32(0.79999995) and exact[2] == np.float32(0.8)
    assert times[10] == np.float32(-7.4505806e-08)
    assert float((times - exact).abs().max()) < 1e-6


def test_resize_with_pad_keeps_aspect_and_pads_with_minus_one() -> None:
    image = torch.arange(8, dtype=torch.float32).reshape(1, 1, 2, 4) / 8  # h 2, w 4 -> 4 x 4
    out = resize_with_pad(image, 4, 4, pad_value=-1.0, centred=True)
    assert out.shape == (1, 1, 4, 4)
    torch.testing.assert_close(out[0, 0, 1:3], image[0, 0])  # ratio 1: the rows unchanged, centred
    assert (out[0, 0, 0] == -1).all() and (out[0, 0, 3] == -1).all()


def test_resize_with_pad_halves_and_splits_odd_padding() -> None:
    image = torch.ones(1, 3, 6, 10)  # ratio max(10 / 5, 6 / 5) = 2 -> 3 x 5, padding 2 rows: 1 top, 1 bottom
    out = resize_with_pad(image, 5, 5, pad_value=-1.0, centred=True)
    assert out.shape == (1, 3, 5, 5)
    assert (out[:, :, 1:4] == 1).all() and (out[:, :, 0] == -1).all() and (out[:, :, 4] == -1).all()


def test_state_bins_are_256_equal_bins_over_minus_one_to_one() -> None:
    state = torch.tensor([[-1.5, -1.0, -0.99, 0.0, 0.999, 1.0, 2.0]])
    # edges -1 + 2 k / 256, k = 0..255; a value's bin is the last edge <= it.
    assert state_bins(state).tolist() == [[-1, 0, 1, 128, 255, 255, 255]]


def test_pi05_prompt_layout() -> None:
    prompts = pi05_prompts([" pick_up the\ncube "], torch.tensor([[0.0, -1.0]]))
    assert prompts == ["Task: pick up the cube, State: 128 0;\nAction: "]


def test_time_embedding_in_float64() -> None:
    embedding = LeRobotTimestepEmbedding(width=4, min_period=4e-3, max_period=4.0)
    time = torch.tensor([0.3], dtype=torch.float32)
    # periods 4e-3 and 4.0 -> angles 2 pi t / period
    angles = [2 * math.pi * 0.30000001192092896 / p for p in (4e-3, 4.0)]
    expected = torch.tensor([[*map(math.sin, angles), *map(math.cos, angles)]], dtype=torch.float32)
    out = embedding(time)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-7)
