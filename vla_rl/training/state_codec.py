"""Split nested training state into safetensors-storable tensors and a JSON skeleton (no pickle).

Training state mixes tensors (optimizer moments, torch RNG), numpy arrays (simulator state,
numpy RNG), tuples (Adam betas, Python RNG state), dicts with int keys (optimizer state per
parameter) and plain scalars. ``encode_state`` walks such a structure, moves every tensor and
array into a flat ``{key: tensor}`` dict and leaves a JSON-able skeleton that records where each
one went; ``decode_state`` reverses it exactly (dtypes, shapes, tuple-ness and key types kept).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

_TENSOR = "__tensor__"
_NDARRAY = "__ndarray__"
_TUPLE = "__tuple__"
_ITEMS = "__items__"
_FLOAT = "__float__"
_MARKERS = (_TENSOR, _NDARRAY, _TUPLE, _ITEMS, _FLOAT)


def encode_state(state: Any) -> tuple[dict[str, torch.Tensor], Any]:
    """Return ``(tensors, skeleton)``; tensor keys are the dotted paths to the tensors in ``state``."""
    tensors: dict[str, torch.Tensor] = {}
    return tensors, _encode(state, "", tensors)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _encode(value: Any, path: str, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        tensors[path] = value.detach().cpu().clone().contiguous()
        return {_TENSOR: path}
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        tensors[path] = torch.from_numpy(array.view(np.uint8).reshape(-1).copy())
        return {_NDARRAY: path, "dtype": array.dtype.str, "shape": list(array.shape)}
    if isinstance(value, np.generic):
        return _encode(value.item(), path, tensors)
    if isinstance(value, float) and not np.isfinite(value):
        return {_FLOAT: repr(value)}
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v, _join(path, i), tensors) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, _join(path, i), tensors) for i, v in enumerate(value)]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not any(k in _MARKERS for k in value):
            return {k: _encode(v, _join(path, k), tensors) for k, v in value.items()}
        return {_ITEMS: [[k, _encode(v, _join(path, k), tensors)] for k, v in value.items()]}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot store {type(value).__name__} at '{path}' in a checkpoint")


def decode_state(tensors: dict[str, torch.Tensor], node: Any) -> Any:
    """Rebuild the structure given to ``encode_state`` from its ``tensors`` and skeleton ``node``."""
    if isinstance(node, list):
        return [decode_state(tensors, v) for v in node]
    if not isinstance(node, dict):
        return node
    if _TENSOR in node:
        return tensors[node[_TENSOR]]
    if _NDARRAY in node:
        raw = tensors[node[_NDARRAY]].numpy()
        return raw.view(np.dtype(node["dtype"])).reshape(node["shape"]).copy()
    if _FLOAT in node:
        return float(node[_FLOAT])
    if _TUPLE in node:
        return tuple(decode_state(tensors, v) for v in node[_TUPLE])
    if _ITEMS in node:
        return {k: decode_state(tensors, v) for k, v in node[_ITEMS]}
    return {k: decode_state(tensors, v) for k, v in node.items()}
