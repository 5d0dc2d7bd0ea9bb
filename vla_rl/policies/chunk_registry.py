"""Registry of action-chunk policy families by name (``token_vla``, ``chunk_vla``, ``pi0``, ...)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vla_rl.policies.chunk_policy import ChunkPolicy

CHUNK_POLICIES: dict[str, type[ChunkPolicy]] = {}

_FAMILY_MODULES = ("vla_rl.policies.vla", "vla_rl.policies.flow", "vla_rl.policies.gaussian_chunk")
"""Imported on first lookup so that their classes register (they need optional extras)."""


def register_chunk_policy(name: str) -> Callable[[type[ChunkPolicy]], type[ChunkPolicy]]:
    def decorator(cls: type[ChunkPolicy]) -> type[ChunkPolicy]:
        if name in CHUNK_POLICIES and CHUNK_POLICIES[name] is not cls:
            raise ValueError(f"chunk policy {name!r} is already registered")
        CHUNK_POLICIES[name] = cls
        cls.registry_name = name
        return cls

    return decorator


def _import_families() -> None:
    for module in _FAMILY_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name is not None and error.name.startswith("vla_rl"):
                continue
            raise ModuleNotFoundError(
                f"{module} needs {error.name!r}: install the VLA extra with pip install -e '.[vla]'"
            ) from error


def chunk_policy_class(name: str) -> type[ChunkPolicy]:
    if name not in CHUNK_POLICIES:
        _import_families()
    if name not in CHUNK_POLICIES:
        raise ValueError(f"unknown chunk policy {name!r}; allowed: {sorted(CHUNK_POLICIES)}")
    return CHUNK_POLICIES[name]


def build_chunk_policy(name: str, **kwargs: Any) -> ChunkPolicy:
    """``CHUNK_POLICIES[name].build(**kwargs)``: each family defines ``build`` from plain values."""
    return chunk_policy_class(name).build(**kwargs)


def load_chunk_policy(name: str, directory: str | Path) -> ChunkPolicy:
    return chunk_policy_class(name).from_pretrained(directory)
