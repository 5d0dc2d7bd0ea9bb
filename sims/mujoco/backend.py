"""The ``mujoco`` backend; the simulator modules load only when an env is built."""

from __future__ import annotations

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig


def make_mujoco_env(cfg: EnvConfig) -> BatchedEnv:
    from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

    return MujocoBatchedEnv(cfg)
