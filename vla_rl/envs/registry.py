"""Backend name -> environment factory registry, so configs pick simulators by name."""

from __future__ import annotations

from collections.abc import Callable

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig

EnvFactory = Callable[[EnvConfig], BatchedEnv]
_BACKENDS: dict[str, EnvFactory] = {}


def register_backend(name: str) -> Callable[[EnvFactory], EnvFactory]:
    """Decorator: ``@register_backend("mujoco")`` on a function ``EnvConfig -> BatchedEnv``."""

    def decorator(factory: EnvFactory) -> EnvFactory:
        if name in _BACKENDS and _BACKENDS[name] is not factory:
            raise ValueError(f"environment backend {name!r} is already registered")
        _BACKENDS[name] = factory
        return factory

    return decorator


def registered_backends() -> list[str]:
    _import_builtin_backends()
    return sorted(_BACKENDS)


def make_env(cfg: EnvConfig) -> BatchedEnv:
    """Build the environment described by ``cfg`` (dispatches on ``cfg.backend``)."""
    _import_builtin_backends()
    if cfg.backend not in _BACKENDS:
        known = ", ".join(sorted(_BACKENDS)) or "none"
        raise KeyError(f"unknown environment backend {cfg.backend!r}; registered: {known}")
    return _BACKENDS[cfg.backend](cfg)


def _import_builtin_backends() -> None:
    # Importing these modules runs their @register_backend decorators; both are light (the
    # heavy simulator imports happen inside the factories).
    import vla_rl.envs.gym_adapter  # noqa: F401
    import vla_rl.sims  # noqa: F401
