"""Env workers as one batched env, with dead workers replaced instead of silently re-run.

``EnvWorkerGroup`` splits ``cfg.num_envs`` worlds over ``num_workers`` env workers and presents them
as one ``BatchedEnv``-like batch (``reset``, ``step``). When a worker dies (its call raises one of
the runtime's worker-death errors), the group spawns a replacement with the same config, resets its
worlds from a fresh seed and returns, for those rows, the new episodes' first observation with
``truncated`` set and ``info["lost"]`` true: the step that was asked of them never ran, so learners
must drop those transitions (their ``final_obs`` is the observation the lost action was chosen
for, not a state after it). Every replacement is recorded in ``events``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch

from vla_rl.distributed.env_worker import EnvWorker
from vla_rl.distributed.runtime import Resources, Runtime, WorkerHandle
from vla_rl.envs.base import Observation, StepResult
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.staged import concat_observations, concat_step_results


class EnvWorkerGroup:
    def __init__(
        self,
        runtime: Runtime,
        cfg: EnvConfig,
        num_workers: int,
        resources: Resources | None = None,
        death_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        if num_workers < 1 or cfg.num_envs % num_workers:
            raise ValueError(f"{cfg.num_envs} worlds do not split into {num_workers} equal env workers")
        self.runtime = runtime
        self.worker_cfg = dataclasses.replace(cfg, num_envs=cfg.num_envs // num_workers)
        self.resources = resources
        self.death_errors = death_errors or _default_death_errors(runtime)
        self.workers: list[WorkerHandle] = [self._spawn() for _ in range(num_workers)]
        self.num_envs = cfg.num_envs
        self.events: list[str] = []
        self._replacements = 0
        self._last_obs: list[Observation] = []

    def _spawn(self) -> WorkerHandle:
        return self.runtime.spawn(EnvWorker, self.worker_cfg, resources=self.resources)

    def _rows(self, index: int) -> slice:
        size = self.worker_cfg.num_envs
        return slice(index * size, (index + 1) * size)

    def reset(self, seed: int) -> Observation:
        """Worker ``k`` resets with seed ``seed + k`` (distinct worlds across workers)."""
        parts = self.runtime.gather([w.call("reset", seed + k) for k, w in enumerate(self.workers)])
        self._last_obs = list(parts)
        return concat_observations(parts)

    def step(self, action: torch.Tensor) -> StepResult:
        futures = [w.call("step", action[self._rows(k)]) for k, w in enumerate(self.workers)]
        results, lost = [], []
        for k, future in enumerate(futures):
            try:
                result = future.result()
                result.info["lost"] = torch.zeros(len(result.reward), dtype=torch.bool)
            except self.death_errors as error:
                result = self._replace(k, error)
                lost.append(k)
            results.append(result)
            self._last_obs[k] = result.obs
        merged = concat_step_results(results)
        merged.info["lost"] = torch.cat([r.info["lost"] for r in results])
        return merged

    def _replace(self, index: int, error: BaseException) -> StepResult:
        self._replacements += 1
        self.workers[index] = self._spawn()
        seed = 1_000_000 + self._replacements  # a fresh seed: the dead worker's episodes are not replayed
        obs = self.workers[index].call("reset", seed).result()
        self.events.append(
            f"env worker {index} died ({type(error).__name__}); replaced, its worlds reset with seed {seed}"
        )
        worlds = self.worker_cfg.num_envs
        zeros = torch.zeros(worlds, dtype=torch.bool)
        info: dict[str, Any] = {"success": zeros, "final_obs": self._last_obs[index], "lost": ~zeros}
        return StepResult(obs, torch.zeros(worlds), zeros.clone(), ~zeros, info)

    def close(self) -> None:
        for worker in self.workers:
            with contextlib.suppress(self.death_errors):
                worker.call("close").result()
            self.runtime.stop(worker)


def _default_death_errors(runtime: Runtime) -> tuple[type[BaseException], ...]:
    ray = getattr(runtime, "ray", None)
    return (ray.exceptions.RayActorError,) if ray is not None else ()
