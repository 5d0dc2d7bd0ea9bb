"""Backend name -> environment factory registry, so configs pick simulators by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig

EnvFactory = Callable[[EnvConfig], BatchedEnv]
UnavailableReason = Callable[[], "str | None"]
_BACKENDS: dict[str, EnvFactory] = {}
_UNAVAILABLE_REASONS: dict[str, UnavailableReason] = {}


def register_backend(
    name: str, unavailable_reason: UnavailableReason | None = None
) -> Callable[[EnvFactory], EnvFactory]:
    """Decorator: ``@register_backend("mujoco")`` on a function ``EnvConfig -> BatchedEnv``.

    ``unavailable_reason`` answers, cheaply and without importing the simulator, why the
    backend cannot run on this machine (missing extra, no GPU, missing assets), or ``None``.
    """

    def decorator(factory: EnvFactory) -> EnvFactory:
        if name in _BACKENDS and _BACKENDS[name] is not factory:
            raise ValueError(f"environment backend {name!r} is already registered")
        _BACKENDS[name] = factory
        if unavailable_reason is not None:
            _UNAVAILABLE_REASONS[name] = unavailable_reason
        return factory

    return decorator


def backend_unavailable_reason(name: str) -> str | None:
    """Why backend ``name`` cannot run here (``None`` when it can)."""
    _import_builtin_backends()
    if name not in _BACKENDS:
        raise KeyError(f"unknown environment backend {name!r}; registered: {', '.join(sorted(_BACKENDS))}")
    check = _UNAVAILABLE_REASONS.get(name)
    return None if check is None else check()


def registered_backends() -> list[str]:
    _import_builtin_backends()
    return sorted(_BACKENDS)


def make_env(cfg: EnvConfig) -> BatchedEnv:
    """Build the environment described by ``cfg`` (dispatches on ``cfg.backend``)."""
    _import_builtin_backends()
    if cfg.backend not in _BACKENDS:
        known = ", ".join(sorted(_BACKENDS)) or "none"
        raise KeyError(f"unknown environment backend {cfg.backend!r}; registered: {known}")
    if cfg.pipeline_stages < 1:
        raise ValueError(f"config key 'env.pipeline_stages' must be >= 1, got {cfg.pipeline_stages}")
    if cfg.pipeline_stages > 1:
        return _make_staged_env(cfg)
    return _BACKENDS[cfg.backend](cfg)


def _make_staged_env(cfg: EnvConfig) -> BatchedEnv:
    from vla_rl.envs.staged import StagedEnv

    stages = cfg.pipeline_stages
    if cfg.num_envs % stages:
        raise ValueError(
            f"config key 'env.pipeline_stages': {cfg.num_envs} worlds do not split into {stages} equal stages"
        )
    stage_cfg = dataclasses.replace(cfg, num_envs=cfg.num_envs // stages, pipeline_stages=1)
    return StagedEnv([_BACKENDS[cfg.backend](stage_cfg) for _ in range(stages)])


def _import_builtin_backends() -> None:
    # Importing these modules runs their @register_backend decorators; both are light (the
    # heavy simulator imports happen inside the factories).
    import vla_rl.envs.gym_adapter  # noqa: F401
    import vla_rl.sims  # noqa: F401
