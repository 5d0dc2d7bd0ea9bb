"""The ``metaworld`` backend; MetaWorld is imported only when an env is built.

MetaWorld 3.1 pins ``mujoco==3.3.0`` while the main environment carries a newer MuJoCo (for MuJoCo
Warp), so it lives in its own virtual environment: ``make .venv-metaworld`` (``make test-metaworld``
runs its tests there).
"""

from __future__ import annotations

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import missing_modules_reason

VENV_HINT = "MetaWorld pins mujoco==3.3.0, so it installs into its own venv: make .venv-metaworld"

EVALUATION_OPTIONS = {"variations": "benchmark", "terminate_on_success": True}
"""How evaluations run MetaWorld (``vla_rl.envs.registry.evaluation_env_config``), as MetaWorld's own
``metaworld.evaluation.evaluation`` does: only the benchmark's 50 fixed variations per task (each
once per 50 episodes of a task, in order), and an episode ends at its first success, so that its
success is success at any step within the time limit."""


def unavailable_reason() -> str | None:
    """Why the backend cannot run here (MetaWorld not installed), or ``None``."""
    reason = missing_modules_reason(["metaworld"], extra="metaworld")
    return None if reason is None else f"{reason} ({VENV_HINT})"


def make_env(cfg: EnvConfig) -> BatchedEnv:
    """MT1 (``task="reach-v3"``), MT10 or MT50 (``task="MT10"``) worlds; see ``batched_env``."""
    from vla_rl.sims.metaworld.batched_env import MetaWorldBatchedEnv

    return MetaWorldBatchedEnv(cfg)
