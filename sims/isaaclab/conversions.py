"""Conversions between Isaac Lab's tensors and the toolkit's observation conventions.

Isaac Lab returns observations as a dict of groups (``"policy"``, ``"critic"``, ...), each either one
concatenated ``[N, D]`` tensor or a dict of per-term tensors. Isaac Lab 3 keeps asset and sensor
data as Warp arrays in places; anything that is not a torch tensor is converted through the array
interfaces (``torch.as_tensor`` reads ``__cuda_array_interface__`` without a copy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def flatten_group(group: Any, num_envs: int, device: torch.device) -> torch.Tensor:
    """One observation group as float32 ``[N, D]`` (a copy, so later steps cannot change it).

    A dict group is concatenated in term order; image terms (4-D) are left out, since images are
    read from the camera sensors as ``rgb_<camera>``.
    """
    if isinstance(group, Mapping):
        parts = [
            flatten_group(term, num_envs, device) for term in group.values() if torch.as_tensor(term).ndim < 4
        ]
        if not parts:
            return torch.zeros(num_envs, 0, dtype=torch.float32, device=device)
        return torch.cat(parts, dim=-1)
    tensor = torch.as_tensor(group)
    return tensor.reshape(num_envs, -1).to(device=device, dtype=torch.float32, copy=True)


def rgb_uint8(image: Any, device: torch.device) -> torch.Tensor:
    """A camera's ``[N, H, W, 3 or 4]`` output as uint8 ``[N, H, W, 3]``.

    Isaac Lab's camera images are row 0 at the top already (no flip). uint8 images are copied as they
    are; float images in [0, 1] are scaled by 255 and rounded (floats above 1 are taken as 0-255).
    """
    tensor = torch.as_tensor(image)
    if tensor.ndim != 4 or tensor.shape[-1] not in (3, 4):
        raise ValueError(f"expected camera images [N, H, W, 3|4], got shape {tuple(tensor.shape)}")
    tensor = tensor[..., :3]
    if tensor.is_floating_point():
        scale = 255.0 if float(tensor.max()) <= 1.0 else 1.0
        tensor = (tensor.float() * scale).round().clamp(0, 255)
    return tensor.to(device=device, dtype=torch.uint8, copy=True)
