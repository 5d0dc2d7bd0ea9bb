"""Registers the ``metaworld`` backend (being written: building it raises until then)."""

from __future__ import annotations

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import register_backend


def unavailable_reason() -> str | None:
    return "the metaworld backend is not written yet"


@register_backend("metaworld", unavailable_reason)
def make_env(cfg: EnvConfig) -> BatchedEnv:
    raise NotImplementedError("the metaworld backend is not written yet")
