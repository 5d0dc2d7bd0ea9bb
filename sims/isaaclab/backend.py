"""The ``isaaclab`` backend: Isaac Lab 3.x tasks (``cfg.task`` is a registered id such as
``Isaac-Lift-Cube-Franka-v0``, ``Isaac-Reach-Franka-v0`` or ``Isaac-Franka-Cabinet-Direct-v0``).

Isaac Lab is not a pip extra of this project: it needs Python 3.12, Isaac Sim and Isaac Lab's own
torch build, installed by Isaac Lab's instructions. Nothing heavy is imported until an env is built.
"""

from __future__ import annotations

import importlib.util
import sys

from vla_rl.envs.base import BatchedEnv
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.extras import MissingExtraError

RUNTIME_MODULES = ("isaaclab", "isaaclab_tasks", "isaacsim")


def unavailable_reason() -> str | None:
    """Why Isaac Lab cannot run here, or None (checks the interpreter, module specs and CUDA only)."""
    problems = []
    if sys.version_info < (3, 12):
        problems.append(f"this is Python {sys.version_info.major}.{sys.version_info.minor}")
    missing = [name for name in RUNTIME_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        problems.append(f"{', '.join(missing)} cannot be imported")
    import torch

    if not torch.cuda.is_available():
        problems.append("no CUDA GPU is visible to torch")
    if not problems:
        return None
    from vla_rl.sims.isaaclab.launch import RUNTIME_HINT

    return f"{RUNTIME_HINT}; here {'; '.join(problems)}"


def make_isaaclab_env(cfg: EnvConfig) -> BatchedEnv:
    """Checks ``cfg``, starts Isaac Sim headless and wraps the task's env."""
    from vla_rl.sims.isaaclab.settings import settings_from_config

    settings = settings_from_config(cfg)
    reason = unavailable_reason()
    if reason is not None:
        raise MissingExtraError(f"the isaaclab backend {reason}")
    from vla_rl.sims.isaaclab.batched_env import IsaacLabBatchedEnv
    from vla_rl.sims.isaaclab.launch import make_isaaclab_env as build

    return IsaacLabBatchedEnv(build(settings), settings)
