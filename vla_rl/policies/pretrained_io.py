"""Save and load the small policies as a directory of a JSON config plus safetensors weights.

The layout mirrors ``transformers``' ``save_pretrained`` (a config file next to
``model.safetensors``), so every policy family is stored and found the same way.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Self

import torch
from safetensors.torch import load_file, save_file
from torch import nn

WEIGHTS_FILE = "model.safetensors"


def save_module_dir(
    module: nn.Module, config: dict[str, Any], directory: str | Path, config_file: str
) -> None:
    """Write ``config`` as ``directory/config_file`` and ``module``'s state as ``model.safetensors``."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    (path / config_file).write_text(json.dumps(config, indent=2))
    save_weights(module.state_dict(), path / WEIGHTS_FILE)


def save_weights(state: dict[str, torch.Tensor], path: str | Path) -> None:
    """``state`` as a safetensors file at ``path`` (detached, contiguous tensors)."""
    save_file({name: tensor.detach().contiguous() for name, tensor in state.items()}, str(path))


def local_dir(directory: str | Path) -> Path:
    """``directory`` as a ``Path``; ``FileNotFoundError`` unless it is a local directory (never a hub id)."""
    path = Path(directory)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a local directory")
    return path


def read_module_dir(
    directory: str | Path, config_file: str
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The config dict and state dict written by ``save_module_dir`` into a local ``directory``."""
    path = local_dir(directory)
    config = json.loads((path / config_file).read_text())
    return config, load_file(str(path / WEIGHTS_FILE))


class DictConfig:
    """``to_dict`` / ``from_dict`` of a dataclass config saved as JSON; an unknown field is an error."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        unknown = set(data) - {f.name for f in fields(cls)}  # type: ignore[arg-type]
        if unknown:
            raise ValueError(f"unknown {cls.__name__} fields {sorted(unknown)}")
        return cls(**data)
