"""A replay buffer's state (``ReplayBuffer.state_dict``) checked before a restore, and kept as one
safetensors file: the tensors under ``last_frame``, ``frames.<key>`` and ``transitions.<field>``, the
settings and counters as JSON in the file's metadata.

The file is written in place, not atomically: the learner writes it into a checkpoint folder, which
``training.checkpoint`` builds in a temporary sibling, fsyncs and renames into place as a whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from safetensors import safe_open
from safetensors.torch import save_file

SETTINGS = ("capacity", "num_envs", "frame_capacity", "share_frames", "obs_keys")
"""The buffer's constructor arguments in its state: a restore needs the same ones, ``load`` builds
the buffer from them."""
TENSOR_GROUPS = ("frames", "transitions")
"""The state's dicts of tensors (besides the tensor ``last_frame``)."""
METADATA_KEY = "replay_buffer"


def check_state(state: dict[str, Any], settings: dict[str, Any], fields: Sequence[str]) -> None:
    """Raise ``ValueError`` unless ``state`` fits a buffer with ``settings`` whose transitions have
    ``fields``."""
    for name, mine in settings.items():
        if state[name] != mine:
            raise ValueError(f"state has {name}={state[name]!r}, this buffer {mine!r}")
    transitions = state["transitions"]
    if transitions and sorted(transitions) != sorted(fields):
        raise ValueError(f"state has transition fields {sorted(transitions)}, expected {tuple(fields)}")
    if bool(transitions) != bool(state["frames"]):
        raise ValueError("state has frames without transitions or transitions without frames")


def save_state(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` to ``path`` (a safetensors file; its folder is created)."""
    rest = dict(state)
    tensors = {"last_frame": rest.pop("last_frame")}
    for group in TENSOR_GROUPS:
        tensors.update({f"{group}.{name}": value for name, value in rest.pop(group).items()})
    tensors = {key: value.detach().cpu().contiguous() for key, value in tensors.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={METADATA_KEY: json.dumps(rest)})


def load_state(path: Path) -> dict[str, Any]:
    """The state written by :func:`save_state`, its tensors on the CPU."""
    with safe_open(str(path), framework="pt", device="cpu") as file:
        metadata = file.metadata() or {}
        if METADATA_KEY not in metadata:
            raise ValueError(f"{path} is not a saved replay buffer")
        state: dict[str, Any] = json.loads(metadata[METADATA_KEY])
        tensors = {key: file.get_tensor(key) for key in file.keys()}  # noqa: SIM118 - not a dict
    state["last_frame"] = tensors.pop("last_frame")
    for group in TENSOR_GROUPS:
        state[group] = {}
    for key, value in tensors.items():
        group, name = key.split(".", 1)
        state[group][name] = value
    return state
