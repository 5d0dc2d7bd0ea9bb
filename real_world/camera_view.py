"""The image a policy reads from the frame a robot's camera publishes: an optional crop (the region
of interest, in the published frame's pixels: top, left, height, width), then a resize to the size
the policy was trained at (PIL's bilinear filter, which widens with the scale when shrinking, so a
large frame is averaged, not sampled). A frame already of the policy's size passes unchanged."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
from PIL import Image

log = logging.getLogger(__name__)


def is_crop_region(crop: Sequence[int]) -> bool:
    """Whether ``crop`` is a region ``[top, left, height, width]``: four whole pixel counts, top and
    left not negative, height and width positive."""
    if len(crop) != 4 or any(not isinstance(v, int) or isinstance(v, bool) for v in crop):
        return False
    top, left, height, width = crop
    return top >= 0 and left >= 0 and height > 0 and width > 0


def policy_view(rgb: np.ndarray, size_hw: tuple[int, int], crop: Sequence[int] | None = None) -> np.ndarray:
    """``rgb`` [H, W, 3] uint8 cropped to ``crop`` (if given) and resized to ``size_hw``. Raises
    ValueError when the crop reaches outside the frame."""
    if crop is not None:
        top, left, height, width = crop
        frame_h, frame_w = rgb.shape[:2]
        if top + height > frame_h or left + width > frame_w:
            raise ValueError(
                f"crop [top {top}, left {left}, height {height}, width {width}] reaches outside the "
                f"{frame_h}x{frame_w} frame"
            )
        rgb = rgb[top : top + height, left : left + width]
    if tuple(rgb.shape[:2]) == tuple(size_hw):
        return rgb
    height, width = size_hw
    resized = Image.fromarray(np.ascontiguousarray(rgb)).resize((width, height), Image.Resampling.BILINEAR)
    return np.array(resized)  # writable (np.asarray of a PIL image is read-only: torch warns on it)


class CameraViews:
    """``policy_view`` for each camera of an observation, with each camera's crop; a camera whose
    frame is resized without a crop (the aspect ratio may change) is logged once."""

    def __init__(self, size_hw: tuple[int, int], crops: Mapping[str, Sequence[int]]) -> None:
        self.size_hw = size_hw
        self.crops = dict(crops)
        self._reported: set[str] = set()

    def __call__(self, images: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        views = {}
        for camera, rgb in images.items():
            crop = self.crops.get(camera)
            if crop is None and tuple(rgb.shape[:2]) != tuple(self.size_hw) and camera not in self._reported:
                self._reported.add(camera)
                log.warning(
                    "camera %s publishes %dx%d frames; resized to the policy's %dx%d without a crop "
                    "(robot.image_crops.%s chooses the region)",
                    camera,
                    *rgb.shape[:2],
                    *self.size_hw,
                    camera,
                )
            try:
                views[camera] = policy_view(rgb, self.size_hw, crop)
            except ValueError as error:
                raise ValueError(f"robot.image_crops.{camera}: {error}") from None
        return views
