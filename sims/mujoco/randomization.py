"""Domain-randomisation splits: in-distribution ``train`` and held-out ``ood_*`` variations.

Each world owns its own ``MjModel`` copy, so colours, lights and camera poses differ per world.
Sampling uses the world's own ``np.random.Generator`` only, so seeded resets are reproducible.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass, replace

import mujoco
import numpy as np

TRAIN_XY_LOW = np.array([0.42, -0.15])
TRAIN_XY_HIGH = np.array([0.62, 0.15])
"""Table region (m, robot base frame) where train objects and targets are placed."""
OUTER_XY_LOW = np.array([0.32, -0.27])
OUTER_XY_HIGH = np.array([0.70, 0.27])
"""Outer box; ``ood_position`` samples the ring between it and the train region."""


@dataclass(frozen=True)
class RandomizationSplit:
    """Ranges of one split; ``train`` values define the training distribution."""

    name: str
    """Split name as used in ``EnvConfig.split``."""
    position_ring: bool
    """Sample object/target xy in the outer ring instead of the train region."""
    object_hue_ranges: tuple[tuple[float, float], ...]
    """Hue intervals (0..1) of objects whose colour carries no meaning (reach/push/lift)."""
    named_colour_hue_jitter: float
    """Max hue shift of colours named in instructions (keeps red recognisably red)."""
    named_colour_value_range: tuple[float, float]
    """HSV value (brightness) range of named colours."""
    table_value_range: tuple[float, float]
    """Grey level of the table."""
    light_diffuse_range: tuple[float, float]
    """Diffuse intensity of the main light."""
    light_pos_jitter_m: float
    """Max displacement of the main light along each axis."""
    camera_pos_jitter_m: float
    """Max displacement of the front camera along each axis."""
    camera_rot_jitter_rad: float
    """Max rotation angle of the front camera about a random axis."""
    heldout_instructions: bool
    """Use instruction phrasings never seen in training (pick_place)."""


_TRAIN_HUES = ((0.0, 0.05), (0.28, 0.42), (0.55, 0.70))
_HELDOUT_HUES = ((0.10, 0.18), (0.75, 0.90))

TRAIN = RandomizationSplit(
    name="train",
    position_ring=False,
    object_hue_ranges=_TRAIN_HUES,
    named_colour_hue_jitter=0.02,
    named_colour_value_range=(0.75, 0.95),
    table_value_range=(0.55, 0.7),
    light_diffuse_range=(0.6, 0.8),
    light_pos_jitter_m=0.1,
    camera_pos_jitter_m=0.01,
    camera_rot_jitter_rad=0.01,
    heldout_instructions=False,
)
OOD_VISUAL = replace(
    TRAIN,
    name="ood_visual",
    object_hue_ranges=_HELDOUT_HUES,
    named_colour_hue_jitter=0.04,
    named_colour_value_range=(0.5, 0.7),
    table_value_range=(0.25, 0.4),
    light_diffuse_range=(0.3, 0.45),
    light_pos_jitter_m=0.4,
    camera_pos_jitter_m=0.05,
    camera_rot_jitter_rad=0.06,
)
SPLITS: dict[str, RandomizationSplit] = {
    "train": TRAIN,
    "ood_visual": OOD_VISUAL,
    "ood_position": replace(TRAIN, name="ood_position", position_ring=True),
    "ood_semantic": replace(TRAIN, name="ood_semantic", heldout_instructions=True),
    "ood_all": replace(OOD_VISUAL, name="ood_all", position_ring=True, heldout_instructions=True),
}


def get_split(name: str) -> RandomizationSplit:
    if name not in SPLITS:
        raise ValueError(f"unknown split {name!r}; allowed: {', '.join(sorted(SPLITS))}")
    return SPLITS[name]


def in_train_region(xy: np.ndarray) -> np.ndarray:
    """Bool [...]: xy [..., 2] inside the train region."""
    return np.all((xy >= TRAIN_XY_LOW) & (xy <= TRAIN_XY_HIGH), axis=-1)


def sample_table_xy(rng: np.random.Generator, split: RandomizationSplit) -> np.ndarray:
    """One xy position (m) on the table in the split's region."""
    if not split.position_ring:
        return rng.uniform(TRAIN_XY_LOW, TRAIN_XY_HIGH)
    while True:
        xy = rng.uniform(OUTER_XY_LOW, OUTER_XY_HIGH)
        if not in_train_region(xy):
            return xy


def sample_separated_xy(
    rng: np.random.Generator, split: RandomizationSplit, count: int, min_distance_m: float
) -> np.ndarray:
    """``count`` xy positions [count, 2] pairwise at least ``min_distance_m`` apart."""
    while True:
        points: list[np.ndarray] = []
        for _ in range(100 * count):
            xy = sample_table_xy(rng, split)
            if all(np.linalg.norm(xy - p) >= min_distance_m for p in points):
                points.append(xy)
                if len(points) == count:
                    return np.stack(points)


def hsv_rgba(hue: float, saturation: float, value: float) -> np.ndarray:
    return np.array([*colorsys.hsv_to_rgb(hue % 1.0, saturation, value), 1.0])


def sample_object_rgba(rng: np.random.Generator, split: RandomizationSplit) -> np.ndarray:
    """Colour of an object whose colour carries no meaning."""
    low, high = split.object_hue_ranges[rng.integers(len(split.object_hue_ranges))]
    return hsv_rgba(rng.uniform(low, high), rng.uniform(0.7, 0.9), rng.uniform(0.7, 0.9))


def sample_named_rgba(rng: np.random.Generator, split: RandomizationSplit, hue: float) -> np.ndarray:
    """Colour close to ``hue`` so that the colour name in an instruction stays correct."""
    jitter = split.named_colour_hue_jitter
    return hsv_rgba(
        hue + rng.uniform(-jitter, jitter),
        rng.uniform(0.75, 0.95),
        rng.uniform(*split.named_colour_value_range),
    )


def randomize_scene(
    model: mujoco.MjModel, base: mujoco.MjModel, rng: np.random.Generator, split: RandomizationSplit
) -> None:
    """Table colour, main light and front camera pose of one world's model (from ``base`` values)."""
    table = model.geom("table").id
    grey = rng.uniform(*split.table_value_range)
    model.geom_rgba[table] = (grey, grey * 0.95, grey * 0.9, 1.0)
    light = model.light("key").id
    model.light_pos[light] = base.light_pos[light] + rng.uniform(-1, 1, 3) * split.light_pos_jitter_m
    model.light_diffuse[light] = rng.uniform(*split.light_diffuse_range)
    cam = model.camera("front").id
    model.cam_pos[cam] = base.cam_pos[cam] + rng.uniform(-1, 1, 3) * split.camera_pos_jitter_m
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    rotation, quat = np.empty(4), np.empty(4)
    mujoco.mju_axisAngle2Quat(rotation, axis, rng.uniform(0.0, split.camera_rot_jitter_rad))
    mujoco.mju_mulQuat(quat, rotation, base.cam_quat[cam])
    model.cam_quat[cam] = quat


RANDOMIZED_MODEL_FIELDS = ("geom_rgba", "light_pos", "light_diffuse", "cam_pos", "cam_quat")
"""Model arrays that differ between worlds (saved in the environment's ``state_dict``)."""
