"""Registry of the RL algorithms that train chunk policies (``ChunkRLConfig.name``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vla_rl.algorithms.chunk_config import ChunkRLConfig
from vla_rl.policies.chunk_policy import ChunkPolicy

_CHUNK_ALGORITHMS: dict[str, type] = {}


def register_chunk_algorithm(name: str) -> Callable[[type], type]:
    """Class decorator: the class is built as ``cls(policy, cfg, reference_policy)``."""

    def decorator(cls: type) -> type:
        if name in _CHUNK_ALGORITHMS and _CHUNK_ALGORITHMS[name] is not cls:
            raise ValueError(f"chunk algorithm {name!r} is already registered")
        _CHUNK_ALGORITHMS[name] = cls
        return cls

    return decorator


def registered_chunk_algorithms() -> list[str]:
    _import_builtin()
    return sorted(_CHUNK_ALGORITHMS)


def build_chunk_algorithm(
    cfg: ChunkRLConfig, policy: ChunkPolicy, reference_policy: ChunkPolicy | None = None
) -> Any:
    _import_builtin()
    if cfg.name not in _CHUNK_ALGORITHMS:
        raise ValueError(f"unknown chunk algorithm {cfg.name!r}; allowed: {sorted(_CHUNK_ALGORITHMS)}")
    return _CHUNK_ALGORITHMS[cfg.name](policy, cfg, reference_policy)


def _import_builtin() -> None:
    # Importing the modules runs their @register_chunk_algorithm decorators.
    import vla_rl.algorithms.chunk_grpo  # noqa: F401
    import vla_rl.algorithms.chunk_ppo  # noqa: F401
