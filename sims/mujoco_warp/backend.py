"""The ``mujoco_warp`` backend; warp and MuJoCo Warp load only when an env is built."""

from __future__ import annotations

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import import_optional, missing_modules_reason

EXTRA = "warp"


def unavailable_reason() -> str | None:
    return missing_modules_reason(["mujoco_warp", "warp"], extra=EXTRA)


def make_mujoco_warp_env(cfg: EnvConfig) -> BatchedEnv:
    import_optional("mujoco_warp", extra=EXTRA, backend="mujoco_warp")
    from vla_rl.sims.mujoco_warp.batched_env import MujocoWarpBatchedEnv

    return MujocoWarpBatchedEnv(cfg)
