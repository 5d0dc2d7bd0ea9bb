"""Layouts of the flat observation vectors, so policies and scripts can slice them by name."""

from __future__ import annotations

import itertools

import numpy as np
import torch

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
    ends = itertools.accumulate(size for _, size in fields)
    return {name: slice(end - size, end) for (name, size), end in zip(fields, ends, strict=True)}


def split_fields(vector: np.ndarray, fields: tuple[tuple[str, int], ...]) -> dict[str, np.ndarray]:
    """Named views of the last dimension of ``vector`` ([N, D])."""
    return {name: vector[..., s] for name, s in field_slices(fields).items()}


def proprio_vector(
    arm_qpos: np.ndarray,
    arm_qvel: np.ndarray,
    gripper_opening_m: np.ndarray,
    tcp_pos: np.ndarray,
    tcp_xmat: np.ndarray,
) -> np.ndarray:
    """float32 [N, 24] in ``PROPRIO_FIELDS`` order: arm joint positions
    and velocities [N, 7], finger opening [N] (m), TCP position [N, 3] and the first two columns of
    the TCP rotation matrix [N, 3, 3] (in the simulator and, from measured joints, on a robot)."""
    rot6 = np.swapaxes(tcp_xmat[..., :2], -1, -2).reshape(len(tcp_xmat), 6)
    return np.concatenate([arm_qpos, arm_qvel, gripper_opening_m[:, None], tcp_pos, rot6], axis=1).astype(
        np.float32
    )


def proprio_tensor(
    arm_qpos: torch.Tensor,
    arm_qvel: torch.Tensor,
    gripper_opening_m: torch.Tensor,
    tcp_pos: torch.Tensor,
    tcp_xmat: torch.Tensor,
) -> torch.Tensor:
    """float32 tensor [N, 24] in ``PROPRIO_FIELDS`` order, on the inputs' device: the twin of
    ``proprio_vector`` (arm joint positions and velocities [N, 7], finger opening [N] (m), TCP position
    [N, 3], first two columns of the TCP rotation matrix [N, 3, 3]). Concatenated in the inputs'
    dtype, then cast, as ``proprio_vector`` does."""
    rot6 = tcp_xmat[..., :2].transpose(-1, -2).reshape(len(tcp_xmat), 6)
    parts = [arm_qpos, arm_qvel, gripper_opening_m[:, None], tcp_pos, rot6]
    return torch.cat(parts, dim=1).to(torch.float32)
