"""Stamped samples and the matching of camera images to a joint state by their stamps."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Stamped:
    """A received value and its header stamp (s)."""

    stamp_s: float
    value: Any


def match_images(
    histories: Mapping[str, Iterable[Stamped]], stamp_s: float, slop_s: float
) -> tuple[dict[str, np.ndarray], dict[str, float], list[str]]:
    """For each camera, the image whose stamp is nearest to the joint state's ``stamp_s``:
    ``(images, image stamps, cameras without an image within slop_s)`` (an approximate-time
    synchroniser over the last few messages of each stream)."""
    images, stamps, unsynced = {}, {}, []
    for camera, history in histories.items():
        candidates = list(history)
        if not candidates:
            unsynced.append(camera)
            continue
        nearest = min(candidates, key=lambda item: abs(item.stamp_s - stamp_s))
        images[camera], stamps[camera] = nearest.value, nearest.stamp_s
        if abs(nearest.stamp_s - stamp_s) > slop_s:
            unsynced.append(camera)
    return images, stamps, unsynced
