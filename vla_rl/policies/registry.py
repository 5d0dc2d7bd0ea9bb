"""Policy name -> class registry and the ``build_policy`` factory."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym

from vla_rl.policies.base import ActorCriticPolicy
from vla_rl.policies.config import PolicyConfig

PolicyClass = Callable[[PolicyConfig, gym.spaces.Dict, gym.spaces.Box], ActorCriticPolicy]
_POLICIES: dict[str, PolicyClass] = {}


def register_policy(name: str) -> Callable[[PolicyClass], PolicyClass]:
    """Class decorator: the class is built as ``cls(cfg, observation_space, action_space)``."""

    def decorator(cls: PolicyClass) -> PolicyClass:
        if name in _POLICIES and _POLICIES[name] is not cls:
            raise ValueError(f"policy {name!r} is already registered")
        _POLICIES[name] = cls
        return cls

    return decorator


def registered_policies() -> list[str]:
    _import_builtin_policies()
    return sorted(_POLICIES)


def build_policy(
    cfg: PolicyConfig, observation_space: gym.spaces.Dict, action_space: gym.spaces.Box
) -> ActorCriticPolicy:
    """Build the policy named ``cfg.name`` for one world's observation and action spaces."""
    _import_builtin_policies()
    if cfg.name not in _POLICIES:
        raise ValueError(f"unknown policy {cfg.name!r}; allowed: {sorted(_POLICIES)}")
    return _POLICIES[cfg.name](cfg, observation_space, action_space)


def _import_builtin_policies() -> None:
    # Importing the modules runs their @register_policy decorators.
    import vla_rl.policies.cnn  # noqa: F401
    import vla_rl.policies.mlp  # noqa: F401
