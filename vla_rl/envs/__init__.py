"""Batch-first, device-aware environment interface shared by every simulator backend."""

from vla_rl.envs.base import BatchedEnv, Observation, StepResult
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env, register_backend, registered_backends

__all__ = [
    "BatchedEnv",
    "EnvConfig",
    "Observation",
    "StepResult",
    "make_env",
    "register_backend",
    "registered_backends",
]
