"""From a camera's published frame to the policy's image: the crop, and a resize checked on a ramp
whose filtered values are worked out by hand."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from vla_rl.real_world.camera_view import CameraViews, is_crop_region, policy_view


def ramp(height: int, width: int, step: int) -> np.ndarray:
    """uint8 RGB whose value is ``step`` times the column, in every row and channel."""
    columns = np.arange(width, dtype=np.uint8) * step
    return np.broadcast_to(columns[None, :, None], (height, width, 3)).copy()


def test_a_frame_of_the_policys_size_passes_unchanged_and_a_crop_keeps_its_region() -> None:
    rgb = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    assert policy_view(rgb, (48, 64)) is rgb
    np.testing.assert_array_equal(policy_view(rgb, (16, 32), crop=(8, 20, 16, 32)), rgb[8:24, 20:52])


def test_halving_a_ramp_gives_the_ramp_at_the_new_pixel_centres() -> None:
    # Output column j covers input columns 2j and 2j+1; its centre lies at input coordinate 2j + 0.5.
    # The bilinear filter, widened to two input pixels when halving, is symmetric about that centre,
    # so on a ramp of 10 per column it gives 10 * (2j + 0.5) = 20j + 5 away from the edges.
    view = policy_view(ramp(4, 16, 10), (4, 8))
    assert view.shape == (4, 8, 3) and view.dtype == np.uint8
    assert view.flags.writeable  # torch.from_numpy warns on a read-only array
    np.testing.assert_allclose(view[:, 1:7, 0], np.broadcast_to(20 * np.arange(1, 7) + 5, (4, 6)), atol=1)


def test_a_flat_frame_stays_flat_whatever_the_scale() -> None:
    flat = np.full((37, 91, 3), 77, dtype=np.uint8)
    for size in [(8, 8), (64, 64), (37, 20)]:
        assert np.all(policy_view(flat, size) == 77)


def test_a_crop_outside_the_frame_is_refused_with_the_frames_size() -> None:
    with pytest.raises(ValueError, match="reaches outside the 48x64 frame"):
        policy_view(np.zeros((48, 64, 3), np.uint8), (8, 8), crop=(40, 0, 16, 16))
    views = CameraViews((8, 8), {"wrist": (0, 60, 8, 8)})
    with pytest.raises(ValueError, match=r"robot.image_crops.wrist: crop .* 48x64 frame"):
        views({"wrist": np.zeros((48, 64, 3), np.uint8)})


def test_crop_regions_are_four_whole_counts_inside_a_frame() -> None:
    assert is_crop_region([0, 0, 8, 8])
    assert not is_crop_region([0, 0, 8])
    assert not is_crop_region([0, 0, 8.5, 8])
    assert not is_crop_region([-1, 0, 8, 8])
    assert not is_crop_region([0, 0, 0, 8])


def test_a_frame_resized_without_a_crop_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    views = CameraViews((8, 8), {"wrist": (0, 0, 16, 16)})
    frames = {"front": np.zeros((48, 64, 3), np.uint8), "wrist": np.zeros((48, 64, 3), np.uint8)}
    with caplog.at_level(logging.WARNING, logger="vla_rl.real_world.camera_view"):
        for _ in range(3):
            out = views(frames)
    assert {camera: image.shape for camera, image in out.items()} == {"front": (8, 8, 3), "wrist": (8, 8, 3)}
    assert [r.getMessage() for r in caplog.records] == [
        "camera front publishes 48x64 frames; resized to the policy's 8x8 without a crop "
        "(robot.image_crops.front chooses the region)"
    ]
