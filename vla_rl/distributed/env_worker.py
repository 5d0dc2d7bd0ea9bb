"""An env worker: a few batched envs (its stages) that a driver steps through a runtime handle."""

from __future__ import annotations

from typing import Any

import torch

from vla_rl.distributed.runtime import Worker
from vla_rl.envs.base import Observation, StepResult, env_spec
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env


class EnvWorker(Worker):
    """Holds ``num_stages`` copies of ``make_env(cfg)``. Every call names the stage it is for and
    returns plain tensors, lists and dicts (picklable), so the worker runs unchanged in this
    process or as a Ray actor. A Ray actor runs its calls one after another, so while the driver
    runs the policy for one stage, the worker simulates the stages whose actions are queued."""

    def __init__(self, cfg: EnvConfig, num_stages: int = 1) -> None:
        self.envs = [make_env(cfg) for _ in range(num_stages)]

    def spec(self) -> dict[str, Any]:
        """What a driver-side proxy needs to present a stage as a ``BatchedEnv`` (``env_spec``)."""
        return env_spec(self.envs[0])

    def world_seed(self, stage: int, seed: int, world: int) -> int | list[int]:
        return self.envs[stage].world_seed(seed, world)

    def reset(self, stage: int, seed: Any = None, env_ids: torch.Tensor | None = None) -> Observation:
        return self.envs[stage].reset(seed=seed, env_ids=env_ids)[0]

    def step(self, stage: int, action: torch.Tensor) -> StepResult:
        return self.envs[stage].step(action)

    def state_dict(self, stage: int) -> dict[str, Any]:
        return self.envs[stage].state_dict()

    def load_state_dict(self, stage: int, state: dict[str, Any]) -> Observation:
        return self.envs[stage].load_state_dict(state)

    def close(self) -> None:
        for env in self.envs:
            env.close()
