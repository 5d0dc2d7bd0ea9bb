"""Batched torch versions of ``randomization.py``'s draws, for resets sampled on ``env.device``.

Every function draws for ``count`` worlds at once from one ``torch.Generator`` (wrapped in
``Draws``) with the same distributions as the per-world numpy functions it mirrors: same ranges,
same hue sets, same rejection rules. Rejection sampling is batched: each round draws a block of
candidates for every world still pending and keeps the first accepted one; only worlds whose
whole block was rejected are drawn again, for a bounded number of rounds. Deciding whether another
round is needed reads one boolean per world on the host (one sync per round); that is the only
host sync here, and the train-region draws need none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import torch
from torch import Tensor
from vla_rl.sims.mujoco.randomization import (
    OUTER_XY_HIGH,
    OUTER_XY_LOW,
    TRAIN_XY_HIGH,
    TRAIN_XY_LOW,
    RandomizationSplit,
)

RING_CANDIDATES = 32
"""Candidates per round for one ``ood_position`` ring point. A uniform point of the outer box lies
in the ring with probability 1 - 0.06 / 0.2052 = 0.708, so a block of 32 fails with probability
0.292 ** 32 = 8e-18 per world and round."""
SEPARATED_CANDIDATES = 256
"""Candidates per point and attempt of ``sample_separated_xy``. For pick_place's 6 points 8 cm
apart the j-th point is accepted with probability (mean over worlds, train region) 1, 0.76, 0.55,
0.38, 0.24, 0.14, the worst of 3,000 worlds 0.019 for the 6th (ring: 0.708 times 1, 0.91, 0.81,
0.73, 0.64, 0.56). Measured: a whole attempt fails for 4e-5 of the worlds (train region; none of
200,000 in the ring), which start over; all ``MAX_REJECTION_ROUNDS`` attempts fail with
probability about (4e-5) ** 16."""
MAX_REJECTION_ROUNDS = 16
"""Rounds of redraws before a rejection sampler gives up. A world's round fails with probability at
most 4e-5 (pick_place's separated points; 3e-9 or less for the others), so 16 failed rounds in a
row (below 1e-70) never happen in practice."""

# Sector (int(6 h) mod 6) -> which of (v, p, q, t) are r, g, b, as in ``colorsys.hsv_to_rgb``.
_HSV_SECTOR_CHANNELS = ((0, 3, 1), (2, 0, 1), (1, 0, 3), (1, 2, 0), (3, 1, 0), (0, 1, 2))


@dataclass(frozen=True)
class Draws:
    """The random source of one batched sample: every draw comes from ``generator`` and is a
    ``dtype`` tensor on ``device`` (the generator's device)."""

    generator: torch.Generator
    device: torch.device
    dtype: torch.dtype

    def uniform(self, shape: tuple[int, ...], low: float | Tensor, high: float | Tensor) -> Tensor:
        """Uniform in [low, high) (``low``/``high`` broadcast against ``shape``), as numpy's."""
        unit = torch.rand(shape, generator=self.generator, device=self.device, dtype=self.dtype)
        return low + (high - low) * unit

    def integers(self, shape: tuple[int, ...], high: int) -> Tensor:
        """Uniform integers (int64) in [0, high)."""
        return torch.randint(high, shape, generator=self.generator, device=self.device)

    def normal(self, shape: tuple[int, ...]) -> Tensor:
        """Standard normal values."""
        return torch.randn(shape, generator=self.generator, device=self.device, dtype=self.dtype)

    def constant(self, values: tuple) -> Tensor:
        """Constant ``values`` (nested tuples of numbers) as a ``dtype`` tensor on ``device``, copied
        there once (a copy from the host per sample would wait for the device)."""
        return _device_constant(values, self.device, self.dtype)


@functools.lru_cache(maxsize=64)
def _device_constant(values: tuple, device: torch.device, dtype: torch.dtype) -> Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


# ------------------------------------------------------------------------------ colours
def hsv_to_rgb(hue: Tensor, saturation: Tensor, value: Tensor) -> Tensor:
    """[..., 3] RGB of HSV values (each [...], hue in [0, 1)): ``colorsys.hsv_to_rgb`` batched."""
    scaled = hue * 6.0
    sector_float = torch.floor(scaled)
    fraction = scaled - sector_float
    p = value * (1.0 - saturation)
    q = value * (1.0 - saturation * fraction)
    t = value * (1.0 - saturation * (1.0 - fraction))
    candidates = torch.stack([value, p, q, t], dim=-1)
    table = _device_constant(_HSV_SECTOR_CHANNELS, hue.device, torch.int64)
    sector = torch.remainder(sector_float.long(), 6)
    return torch.gather(candidates, -1, table[sector])


def hsv_rgba(hue: Tensor, saturation: Tensor, value: Tensor) -> Tensor:
    """[..., 4] opaque RGBA; hue wraps modulo 1 (``randomization.hsv_rgba`` batched)."""
    rgb = hsv_to_rgb(torch.remainder(hue, 1.0), saturation, value)
    return torch.cat([rgb, torch.ones_like(rgb[..., :1])], dim=-1)


def sample_object_rgba(draws: Draws, split: RandomizationSplit, count: int) -> Tensor:
    """[count, 4] colours of objects whose colour carries no meaning (``sample_object_rgba``)."""
    ranges = draws.constant(split.object_hue_ranges)
    chosen = ranges[draws.integers((count,), len(split.object_hue_ranges))]
    hue = draws.uniform((count,), chosen[:, 0], chosen[:, 1])
    return hsv_rgba(hue, draws.uniform((count,), 0.7, 0.9), draws.uniform((count,), 0.7, 0.9))


def sample_named_rgba(draws: Draws, split: RandomizationSplit, count: int, hue: float) -> Tensor:
    """[count, 4] colours close to ``hue`` so that a colour name stays right (``sample_named_rgba``)."""
    jitter = split.named_colour_hue_jitter
    return hsv_rgba(
        hue + draws.uniform((count,), -jitter, jitter),
        draws.uniform((count,), 0.75, 0.95),
        draws.uniform((count,), *split.named_colour_value_range),
    )


# ------------------------------------------------------------------ rejection sampling
def first_accepted(candidates: Tensor, accepted: Tensor) -> tuple[Tensor, Tensor]:
    """The first accepted of each row's candidates ([n, m, ...], ``accepted`` [n, m] bool) as
    [n, ...], and [n] whether any was accepted (rows with none get their first candidate). The
    first accepted of i.i.d. candidates is distributed as one draw of the rejection loop."""
    index = torch.argmax(accepted.to(torch.int8), dim=1)  # argmax returns the first maximum
    rows = torch.arange(len(candidates), device=candidates.device)
    return candidates[rows, index], accepted.any(dim=1)


def redraw_failed(
    count: int,
    attempt: Callable[[int], tuple[Tensor, Tensor]],
    device: torch.device,
    what: str,
    max_rounds: int = MAX_REJECTION_ROUNDS,
) -> Tensor:
    """[count, ...] values of ``attempt(n)``, which draws [n, ...] values for n worlds and says [n]
    which of them were accepted. Only worlds whose value was rejected are drawn again; after
    ``max_rounds`` rounds a RuntimeError names ``what``."""
    rows = torch.arange(count, device=device)
    result: Tensor | None = None
    for _ in range(max_rounds):
        values, accepted = attempt(len(rows))
        if result is None:
            result = values.new_empty((count, *values.shape[1:]))
        result[rows] = values  # rejected rows are overwritten by a later round
        rows = rows[~accepted]  # host sync: how many worlds are still pending
        if rows.numel() == 0:
            return result
    raise RuntimeError(
        f"rejection sampling of {what} accepted nothing for {rows.numel()} of {count} worlds "
        f"in {max_rounds} rounds"
    )


# ------------------------------------------------------------------------ table regions
@dataclass(frozen=True)
class TableRegion:
    """Where a split places objects on the table: uniform in the box ``low_m``..``high_m`` (m,
    robot base frame) and, for the ``ood_position`` ring, only the part outside the train region."""

    low_m: Tensor
    high_m: Tensor
    train_low_m: Tensor
    train_high_m: Tensor
    ring: bool

    @classmethod
    def of_split(cls, split: RandomizationSplit, device: torch.device, dtype: torch.dtype) -> TableRegion:
        def tensor(values: object) -> Tensor:
            return torch.as_tensor(values, dtype=dtype, device=device)

        outer = split.position_ring
        return cls(
            low_m=tensor(OUTER_XY_LOW if outer else TRAIN_XY_LOW),
            high_m=tensor(OUTER_XY_HIGH if outer else TRAIN_XY_HIGH),
            train_low_m=tensor(TRAIN_XY_LOW),
            train_high_m=tensor(TRAIN_XY_HIGH),
            ring=outer,
        )

    def candidates(self, draws: Draws, shape: tuple[int, ...]) -> Tensor:
        """[*shape, 2] uniform points of the box."""
        return draws.uniform((*shape, 2), self.low_m, self.high_m)

    def contains(self, xy_m: Tensor) -> Tensor:
        """Bool [...] of points [..., 2] of the box: inside the region (for the ring: outside the
        train region, whose boundary counts as inside it as in ``in_train_region``)."""
        if not self.ring:
            return torch.ones(xy_m.shape[:-1], dtype=torch.bool, device=xy_m.device)
        in_train = (xy_m >= self.train_low_m) & (xy_m <= self.train_high_m)
        return ~in_train.all(dim=-1)

    def sample(self, draws: Draws, count: int) -> Tensor:
        """[count, 2] uniform points of the region (``sample_table_xy``); no host sync for the
        train region."""
        if not self.ring:
            return self.candidates(draws, (count,))

        def attempt(n: int) -> tuple[Tensor, Tensor]:
            xy = self.candidates(draws, (n, RING_CANDIDATES))
            return first_accepted(xy, self.contains(xy))

        return redraw_failed(count, attempt, draws.device, "a table point in the ood_position ring")


def sample_separated_xy(
    draws: Draws, region: TableRegion, count: int, num_points: int, min_distance_m: float
) -> Tensor:
    """[count, num_points, 2] points of the region, pairwise at least ``min_distance_m`` apart
    (``sample_separated_xy``): point j is uniform over the region outside the discs around points
    0..j-1, as in the numpy loop. An attempt draws a block of ``SEPARATED_CANDIDATES`` per point; a
    world where some point found no room starts over, as the numpy loop does after 100 tries per
    point."""

    def attempt(n: int) -> tuple[Tensor, Tensor]:
        points = torch.empty((n, num_points, 2), dtype=draws.dtype, device=draws.device)
        complete = torch.ones(n, dtype=torch.bool, device=draws.device)
        for j in range(num_points):
            candidates = region.candidates(draws, (n, SEPARATED_CANDIDATES))
            accepted = region.contains(candidates)
            if j:
                gaps_m = torch.linalg.vector_norm(candidates[:, :, None] - points[:, None, :j], dim=-1)
                accepted &= (gaps_m >= min_distance_m).all(dim=-1)
            points[:, j], found = first_accepted(candidates, accepted)
            complete &= found
        return points, complete

    return redraw_failed(count, attempt, draws.device, f"{num_points} points {min_distance_m} m apart")


# ---------------------------------------------------------------------------- the scene
def quat_multiply(a: Tensor, b: Tensor) -> Tensor:
    """[..., 4] Hamilton products a * b of (w, x, y, z) quaternions (``mju_mulQuat``)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        dim=-1,
    )


def axis_angle_quat(unit_axis: Tensor, angle_rad: Tensor) -> Tensor:
    """[..., 4] rotations by ``angle_rad`` [...] about unit axes [..., 3] (``mju_axisAngle2Quat``)."""
    half = angle_rad.unsqueeze(-1) / 2
    return torch.cat([torch.cos(half), unit_axis * torch.sin(half)], dim=-1)


@dataclass(frozen=True)
class SceneIds:
    """Ids of what ``randomize_scene`` changes, looked up once: the table geom, the ``key`` light
    and the ``front`` camera."""

    table_geom: int
    key_light: int
    front_camera: int

    @classmethod
    def of_model(cls, model: mujoco.MjModel) -> SceneIds:
        return cls(model.geom("table").id, model.light("key").id, model.camera("front").id)


def randomize_scene_fields(
    draws: Draws, split: RandomizationSplit, ids: SceneIds, fields: dict[str, Tensor]
) -> None:
    """Table colour, key light and front camera pose of ``count`` worlds, written in place into
    ``fields`` (model arrays [count, ...] holding the base model's values): ``randomize_scene``
    batched, with the camera's random-axis rotation applied as a batched quaternion product."""
    count = len(fields["geom_rgba"])
    grey = draws.uniform((count,), *split.table_value_range)
    fields["geom_rgba"][:, ids.table_geom] = torch.stack(
        [grey, grey * 0.95, grey * 0.9, torch.ones_like(grey)], dim=-1
    )
    light = ids.key_light
    fields["light_pos"][:, light] += draws.uniform((count, 3), -1.0, 1.0) * split.light_pos_jitter_m
    fields["light_diffuse"][:, light] = draws.uniform((count, 1), *split.light_diffuse_range)
    cam = ids.front_camera
    fields["cam_pos"][:, cam] += draws.uniform((count, 3), -1.0, 1.0) * split.camera_pos_jitter_m
    axis = draws.normal((count, 3))
    axis = axis / torch.linalg.vector_norm(axis, dim=-1, keepdim=True)
    rotation = axis_angle_quat(axis, draws.uniform((count,), 0.0, split.camera_rot_jitter_rad))
    fields["cam_quat"][:, cam] = quat_multiply(rotation, fields["cam_quat"][:, cam])
