"""Layouts of the flat observation vectors, so policies and scripts can slice them by name."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vla_rl.sims.mujoco.readout import WorldReadout

PROPRIO_FIELDS: tuple[tuple[str, int], ...] = (
    ("arm_qpos", 7),
    ("arm_qvel", 7),
    ("gripper_opening_m", 1),
    ("tcp_pos", 3),
    ("tcp_rot6", 6),
)
"""``obs["proprio"]`` layout: arm joints (rad, rad/s), finger distance, TCP position and the first
two columns of the TCP rotation matrix."""


def field_slices(fields: tuple[tuple[str, int], ...]) -> dict[str, slice]:
    slices, start = {}, 0
    for name, size in fields:
        slices[name] = slice(start, start + size)
        start += size
    return slices


def fields_size(fields: tuple[tuple[str, int], ...]) -> int:
    return sum(size for _, size in fields)


def split_fields(vector: np.ndarray, fields: tuple[tuple[str, int], ...]) -> dict[str, np.ndarray]:
    """Named views of the last dimension of ``vector`` ([N, D])."""
    return {name: vector[..., s] for name, s in field_slices(fields).items()}


def proprio_vector(
    readout: WorldReadout, arm_qadr: np.ndarray, arm_vadr: np.ndarray, finger_qadr: np.ndarray
) -> np.ndarray:
    """float32 [N, fields_size(PROPRIO_FIELDS)] in ``PROPRIO_FIELDS`` order from a ``WorldReadout``:
    arm joint positions and velocities, finger opening (m), TCP position and the first two columns
    of the TCP rotation matrix."""
    qpos = readout.qpos
    return np.concatenate(
        [
            qpos[:, arm_qadr],
            readout.qvel[:, arm_vadr],
            qpos[:, finger_qadr].sum(axis=1, keepdims=True),
            readout.sensordata[:, 0:3],
            readout.tcp_xmat.reshape(-1, 3, 3)[:, :, :2].transpose(0, 2, 1).reshape(-1, 6),
        ],
        axis=1,
    ).astype(np.float32)
