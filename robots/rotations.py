"""Batched rotation helpers (numpy, leading batch dimension)."""

from __future__ import annotations

import numpy as np


def axis_angle_to_matrix(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula: [N, 3] rotation vectors (rad) -> [N, 3, 3] rotation matrices."""
    angle = np.linalg.norm(rotvec, axis=-1, keepdims=True)
    axis = rotvec / np.maximum(angle, 1e-12)
    x, y, z = axis[..., 0], axis[..., 1], axis[..., 2]
    zero = np.zeros_like(x)
    skew = np.stack([zero, -z, y, z, zero, -x, -y, x, zero], axis=-1).reshape(*rotvec.shape[:-1], 3, 3)
    s = np.sin(angle)[..., None]
    c = np.cos(angle)[..., None]
    eye = np.broadcast_to(np.eye(3), skew.shape)
    return eye + s * skew + (1.0 - c) * (skew @ skew)


def matrix_to_axis_angle(mat: np.ndarray) -> np.ndarray:
    """[N, 3, 3] rotation matrices -> [N, 3] rotation vectors (rad), robust near 0 and pi."""
    trace = mat[..., 0, 0] + mat[..., 1, 1] + mat[..., 2, 2]
    cos = np.clip((trace - 1.0) / 2.0, -1.0, 1.0)
    angle = np.arccos(cos)
    vee = np.stack(
        [mat[..., 2, 1] - mat[..., 1, 2], mat[..., 0, 2] - mat[..., 2, 0], mat[..., 1, 0] - mat[..., 0, 1]],
        axis=-1,
    )
    sin = np.sin(angle)
    small = sin > 1e-6
    scale = np.where(small, angle / (2.0 * np.where(small, sin, 1.0)), 0.5)
    rotvec = vee * scale[..., None]
    near_pi = (~small) & (angle > 1.0)
    if np.any(near_pi):
        # Near pi the antisymmetric part vanishes; the axis is the dominant column of (R + I) / 2.
        sym = (mat[near_pi] + np.eye(3)) / 2.0
        diag = np.diagonal(sym, axis1=-2, axis2=-1)
        col = np.argmax(diag, axis=-1)
        axis = sym[np.arange(len(col)), :, col]
        axis = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
        rotvec[near_pi] = axis * angle[near_pi][..., None]
    return rotvec


def orientation_error(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Rotation vector (world frame) that turns ``current`` into ``target`` ([N,3,3] each)."""
    return matrix_to_axis_angle(target @ np.swapaxes(current, -1, -2))
