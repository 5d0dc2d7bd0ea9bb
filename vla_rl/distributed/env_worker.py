"""An env worker: a few batched envs (its stages) that a driver steps through a runtime handle."""

from __future__ import annotations

from typing import Any

from vla_rl.distributed.runtime import Worker
from vla_rl.envs.base import env_spec
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

    def run(self, stage: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """``method(*args, **kwargs)`` of stage ``stage``'s env: a ``BatchedEnv`` call (``reset``,
        ``step``, ``world_seed``, ``state_dict``, ``load_state_dict``)."""
        return getattr(self.envs[stage], method)(*args, **kwargs)

    def close(self) -> None:
        for env in self.envs:
            env.close()
