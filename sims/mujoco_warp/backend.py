"""The ``mujoco_warp`` backend; warp and MuJoCo Warp load only when an env is built.

``env.options.compute`` picks where everything above the physics runs: ``device`` (the default:
controllers, rewards, observations and resets as torch operations on ``env.device``,
``MujocoWarpDeviceEnv``) or ``host`` (numpy on the host with a copy of the state every control step,
``MujocoWarpBatchedEnv``; the path whose resets repeat the CPU ``mujoco`` backend's draw for draw).
"""

from __future__ import annotations

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import import_optional, missing_modules_reason

EXTRA = "warp"
COMPUTE_CHOICES = ("device", "host")
"""``env.options.compute`` values."""
DEFAULT_COMPUTE = "device"


def unavailable_reason() -> str | None:
    return missing_modules_reason(["mujoco_warp", "warp"], extra=EXTRA)


def make_mujoco_warp_env(cfg: EnvConfig) -> BatchedEnv:
    compute = cfg.options.get("compute", DEFAULT_COMPUTE)
    if compute not in COMPUTE_CHOICES:
        raise ValueError(f"unknown options.compute {compute!r}; allowed: {', '.join(COMPUTE_CHOICES)}")
    import_optional("mujoco_warp", extra=EXTRA, backend="mujoco_warp")
    if compute == "host":
        from vla_rl.sims.mujoco_warp.batched_env import MujocoWarpBatchedEnv

        return MujocoWarpBatchedEnv(cfg)
    from vla_rl.sims.mujoco_warp.device_env import MujocoWarpDeviceEnv

    return MujocoWarpDeviceEnv(cfg)
