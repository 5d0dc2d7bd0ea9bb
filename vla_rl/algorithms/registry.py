"""Algorithm name -> class registry and the ``build_algorithm`` factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vla_rl.algorithms.config import PPOConfig
from vla_rl.policies.base import ActorCriticPolicy

AlgorithmClass = Callable[..., Any]
_ALGORITHMS: dict[str, AlgorithmClass] = {}


def register_algorithm(name: str) -> Callable[[AlgorithmClass], AlgorithmClass]:
    """Class decorator: the class is built as ``cls(policy, cfg)``."""

    def decorator(cls: AlgorithmClass) -> AlgorithmClass:
        if name in _ALGORITHMS and _ALGORITHMS[name] is not cls:
            raise ValueError(f"algorithm {name!r} is already registered")
        _ALGORITHMS[name] = cls
        return cls

    return decorator


def registered_algorithms() -> list[str]:
    _import_builtin_algorithms()
    return sorted(_ALGORITHMS)


def build_algorithm(cfg: PPOConfig, policy: ActorCriticPolicy) -> Any:
    """Build the algorithm named ``cfg.name`` training ``policy``."""
    _import_builtin_algorithms()
    if cfg.name not in _ALGORITHMS:
        raise ValueError(f"unknown algorithm {cfg.name!r}; allowed: {sorted(_ALGORITHMS)}")
    return _ALGORITHMS[cfg.name](policy, cfg)


def _import_builtin_algorithms() -> None:
    # Importing the module runs its @register_algorithm decorator.
    import vla_rl.algorithms.ppo  # noqa: F401
