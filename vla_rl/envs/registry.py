"""Environment backends by name (``env.backend``): a table of ``"module:factory"`` paths.

A factory is a function ``EnvConfig -> BatchedEnv``. Backend modules are light: the simulator is
imported inside the factory, so resolving a name never needs the simulator's extra. A backend of
your own plugs in as ``env.backend=package.module:make_env``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.registry import removed_decorator, resolve

EnvFactory = Callable[[EnvConfig], BatchedEnv]
register_backend = removed_decorator("register_backend", "env.backend")

BACKENDS: dict[str, str] = {
    "mujoco": "vla_rl.sims.mujoco.backend:make_mujoco_env",
    "mujoco_warp": "vla_rl.sims.mujoco_warp.backend:make_mujoco_warp_env",
    "maniskill": "vla_rl.sims.maniskill.backend:make_env",
    "metaworld": "vla_rl.sims.metaworld.backend:make_env",
    "libero": "vla_rl.sims.libero.backend:make_env",
    "isaaclab": "vla_rl.sims.isaaclab.backend:make_isaaclab_env",
    "gymnasium": "vla_rl.envs.gym_adapter:make_gymnasium_env",
}
"""Built-in backends: name -> ``"module:factory"``."""

UNAVAILABLE_REASONS: dict[str, str] = {
    "mujoco_warp": "vla_rl.sims.mujoco_warp.backend:unavailable_reason",
    "maniskill": "vla_rl.sims.maniskill.backend:unavailable_reason",
    "metaworld": "vla_rl.sims.metaworld.backend:unavailable_reason",
    "libero": "vla_rl.sims.libero.backend:unavailable_reason",
    "isaaclab": "vla_rl.sims.isaaclab.backend:unavailable_reason",
}
"""``"module:function"`` answering, cheaply and without importing the simulator, why a backend
cannot run on this machine (missing extra, no GPU, missing assets), or ``None``; a backend not
listed here always can."""


EVALUATION_OPTIONS: dict[str, str] = {
    "libero": "vla_rl.sims.libero.backend:EVALUATION_OPTIONS",
    "metaworld": "vla_rl.sims.metaworld.backend:EVALUATION_OPTIONS",
}
"""``"module:attribute"`` of the ``env.options`` with which a backend's evaluations follow its
benchmark's own protocol (LIBERO: each task's fixed initial states in turn; MetaWorld: each task's
fixed benchmark variations in turn, episodes ending at success); a config's own
``env.options`` take precedence."""


def evaluation_env_config(cfg: EnvConfig) -> EnvConfig:
    """``cfg`` with its backend's evaluation options (:data:`EVALUATION_OPTIONS`) under its own."""
    if cfg.backend not in EVALUATION_OPTIONS:
        return cfg
    protocol = resolve(EVALUATION_OPTIONS, cfg.backend, "environment backend")
    return dataclasses.replace(cfg, options={**protocol, **cfg.options})


def backend_factory(name: str) -> EnvFactory:
    """The factory of backend ``name`` (a name of :data:`BACKENDS` or ``"module:factory"``)."""
    return resolve(BACKENDS, name, "environment backend")


def backend_unavailable_reason(name: str) -> str | None:
    """Why backend ``name`` cannot run here (``None`` when it can)."""
    backend_factory(name)  # unknown names fail here, naming the known ones
    if name not in UNAVAILABLE_REASONS:
        return None
    return resolve(UNAVAILABLE_REASONS, name, "environment backend")()


def registered_backends() -> list[str]:
    return sorted(BACKENDS)


def make_env(cfg: EnvConfig) -> BatchedEnv:
    """Build the environment described by ``cfg`` (dispatches on ``cfg.backend``); with
    ``pipeline_stages`` > 1, a ``StagedEnv`` of that many equal groups of its worlds."""
    factory = backend_factory(cfg.backend)
    if cfg.pipeline_stages < 1:
        raise ValueError(f"config key 'env.pipeline_stages' must be >= 1, got {cfg.pipeline_stages}")
    if cfg.pipeline_stages == 1:
        return factory(cfg)
    from vla_rl.envs.staged import StagedEnv

    stages = cfg.pipeline_stages
    if cfg.num_envs % stages:
        raise ValueError(
            f"config key 'env.pipeline_stages': {cfg.num_envs} worlds do not split into {stages} equal stages"
        )
    stage_cfg = dataclasses.replace(cfg, num_envs=cfg.num_envs // stages, pipeline_stages=1)
    return StagedEnv([factory(stage_cfg) for _ in range(stages)])
