"""Moving and slicing batched observations (tensors plus the ``instruction`` list)."""

from __future__ import annotations

import torch

from vla_rl.envs.base import Observation


def obs_to_device(obs: Observation, device: torch.device | str) -> Observation:
    """Tensors moved to ``device``; other entries (the instruction strings) unchanged."""
    return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in obs.items()}


def select_worlds(obs: Observation, indices: torch.Tensor | slice) -> Observation:
    """Rows ``indices`` (int64 [M], or a slice) of every batched entry."""
    if isinstance(indices, slice):
        return {key: value[indices] for key, value in obs.items()}
    picked: Observation = {}
    rows = indices.tolist()
    for key, value in obs.items():
        if isinstance(value, torch.Tensor):
            picked[key] = value[indices.to(value.device)]
        else:
            picked[key] = [value[i] for i in rows]
    return picked


def module_device(module: torch.nn.Module) -> torch.device:
    """Device of the first parameter or buffer (CPU for a module without any)."""
    for tensor in module.parameters():
        return tensor.device
    for tensor in module.buffers():
        return tensor.device
    return torch.device("cpu")
