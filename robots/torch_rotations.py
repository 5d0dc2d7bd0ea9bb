"""Batched rotation helpers in torch: the twins of ``vla_rl.robots.rotations`` (leading batch dimension).

Every function runs on the device and in the dtype of its input, with no host round trip (no
``.item()``, no data-dependent Python branches), so a device-resident rollout can call it per step.
"""

from __future__ import annotations

import torch

_AXIS_EPS = 1e-12
"""Smallest angle (rad) divided by when normalising a rotation vector to its axis."""
_SMALL_SIN = 1e-6
"""Below this sine of the angle the antisymmetric part of a rotation matrix is too small to read."""
_NEAR_PI_ANGLE_RAD = 1.0
"""With a small sine, angles above this are taken as near pi (below: near 0)."""


def euclidean_norm(vector: torch.Tensor, keepdim: bool = False) -> torch.Tensor:
    """Euclidean norm over the last dimension, summed in ``np.linalg.norm``'s order.

    ``sqrt(sum(v * v))`` reproduces numpy's float64 result bit for bit on the CPU, where
    ``torch.linalg.vector_norm`` differs in the last bit for about one vector in ten; a distance
    exactly at a threshold then compares the same way as in the numpy code.
    """
    return torch.sqrt((vector * vector).sum(dim=-1, keepdim=keepdim))


def _eye3(like: torch.Tensor) -> torch.Tensor:
    """3 x 3 identity on the device and in the dtype of ``like``."""
    return torch.eye(3, device=like.device, dtype=like.dtype)


def skew_matrix(vector: torch.Tensor) -> torch.Tensor:
    """[..., 3] vectors -> [..., 3, 3] cross-product matrices ``[v]x`` (``[v]x @ w == v x w``)."""
    x, y, z = vector.unbind(-1)
    zero = torch.zeros_like(x)
    rows = torch.stack([zero, -z, y, z, zero, -x, -y, x, zero], dim=-1)
    return rows.reshape(*vector.shape[:-1], 3, 3)


def axis_angle_to_matrix(rotvec_rad: torch.Tensor) -> torch.Tensor:
    """Rodrigues' formula: [N, 3] rotation vectors (rad) -> [N, 3, 3] rotation matrices."""
    angle_rad = euclidean_norm(rotvec_rad, keepdim=True)
    axis = rotvec_rad / torch.clamp(angle_rad, min=_AXIS_EPS)
    skew = skew_matrix(axis)
    sin = torch.sin(angle_rad)[..., None]
    cos = torch.cos(angle_rad)[..., None]
    return _eye3(rotvec_rad) + sin * skew + (1.0 - cos) * (skew @ skew)


def _near_pi_axis(mat: torch.Tensor) -> torch.Tensor:
    """[N, 3] unit rotation axes of [N, 3, 3] rotations read from their symmetric part.

    Near pi the antisymmetric part vanishes; the axis is the column of (R + I) / 2 with the largest
    diagonal entry (that entry is at least 1/3 for any rotation, so the column never has length 0).
    Computed for every row; the caller keeps it only where the angle is near pi.
    """
    sym = (mat + _eye3(mat)) / 2.0
    column = torch.diagonal(sym, dim1=-2, dim2=-1).argmax(dim=-1)
    index = column[..., None, None].expand(*column.shape, 3, 1)
    axis = torch.gather(sym, -1, index)[..., 0]
    return axis / euclidean_norm(axis, keepdim=True)


def matrix_to_axis_angle(mat: torch.Tensor) -> torch.Tensor:
    """[N, 3, 3] rotation matrices -> [N, 3] rotation vectors (rad), robust near 0 and pi."""
    trace = mat[..., 0, 0] + mat[..., 1, 1] + mat[..., 2, 2]
    cos = torch.clamp((trace - 1.0) / 2.0, -1.0, 1.0)
    angle_rad = torch.arccos(cos)
    vee = torch.stack(
        [mat[..., 2, 1] - mat[..., 1, 2], mat[..., 0, 2] - mat[..., 2, 0], mat[..., 1, 0] - mat[..., 0, 1]],
        dim=-1,
    )
    sin = torch.sin(angle_rad)
    small = sin > _SMALL_SIN
    one = torch.ones_like(sin)
    scale = torch.where(small, angle_rad / (2.0 * torch.where(small, sin, one)), 0.5 * one)
    rotvec_rad = vee * scale[..., None]
    near_pi = (~small) & (angle_rad > _NEAR_PI_ANGLE_RAD)
    return torch.where(near_pi[..., None], _near_pi_axis(mat) * angle_rad[..., None], rotvec_rad)


def orientation_error(target: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    """Rotation vector [N, 3] (rad, world frame) that turns ``current`` into ``target`` ([N,3,3] each)."""
    return matrix_to_axis_angle(target @ current.transpose(-1, -2))
