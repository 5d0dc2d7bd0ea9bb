"""An env worker: one batched env (``make_env``) that a driver steps through a runtime handle."""

from __future__ import annotations

from typing import Any

import torch

from vla_rl.envs.base import Observation, StepResult
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env


class EnvWorker:
    """Holds ``make_env(cfg)``; every call returns plain tensors, lists and dicts (picklable), so the
    worker runs unchanged in this process or as a Ray actor."""

    def __init__(self, cfg: EnvConfig) -> None:
        self.env = make_env(cfg)

    def reset(self, seed: Any = None, env_ids: torch.Tensor | None = None) -> Observation:
        return self.env.reset(seed=seed, env_ids=env_ids)[0]

    def step(self, action: torch.Tensor) -> StepResult:
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()
