"""Env workers presented to the rollout loop as one ``BatchedEnv``, with dead workers replaced.

``make_worker_env`` spreads ``cfg.num_envs`` worlds over ``num_workers`` env workers of
``stages_per_worker`` stages each and returns a ``StagedEnv`` whose stages are ``RemoteEnv``
proxies, so the ordinary ``RolloutCollector`` drives them: with several stages it sends one stage
its actions and acts for the next while the workers simulate (pipelining), on either runtime.
An ``EnvWorker`` is the worker's side: a few batched envs (its stages) that the driver steps through
a runtime handle.

When a worker dies (a call raises one of the runtime's worker-death errors), ``EnvWorkerPool``
spawns a replacement with the same config and records an event. Each of the dead worker's stages
then resets its worlds from a fresh seed and returns, for its rows, the new episodes' first
observation with ``truncated`` set and ``info["lost"]`` true: the step asked of them never ran, so
the collector drops those transitions rather than re-running the step on a fresh world.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

import torch

from vla_rl.config.distributed import DistributedConfig
from vla_rl.distributed.layout import make_training_runtime, worker_resources
from vla_rl.distributed.runtime import Resources, Runtime, Worker, WorkerHandle
from vla_rl.envs.base import BatchedEnv, Observation, StepResult, adopt_spec, env_spec
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env
from vla_rl.envs.staged import StagedEnv

FRESH_SEED_BASE = 1_000_000
"""Seeds of replaced workers' worlds start here (the k-th replacement uses base + k)."""


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


class EnvWorkerPool:
    """``num_workers`` env workers of ``stages_per_worker`` stages; replaces a worker that died."""

    def __init__(
        self,
        runtime: Runtime,
        cfg: EnvConfig,
        num_workers: int,
        stages_per_worker: int = 1,
        resources: Resources | Sequence[Resources] | None = None,
        worker_cls: type = EnvWorker,
    ) -> None:
        """``resources``: one for all workers, or one per worker."""
        stages = num_workers * stages_per_worker
        if num_workers < 1 or stages_per_worker < 1 or cfg.num_envs % stages:
            raise ValueError(
                f"{cfg.num_envs} worlds do not split into {num_workers} env workers x "
                f"{stages_per_worker} stages of equal size"
            )
        self.runtime = runtime
        self.stage_cfg = dataclasses.replace(cfg, num_envs=cfg.num_envs // stages, pipeline_stages=1)
        self.stages_per_worker = stages_per_worker
        self.resources = list(resources) if isinstance(resources, Sequence) else [resources] * num_workers
        self.worker_cls = worker_cls
        self.death_errors = runtime.worker_death_errors()
        self.workers: list[WorkerHandle] = [self._spawn(index) for index in range(num_workers)]
        self.generations = [0] * num_workers
        """How often each worker was replaced; a stage compares it with the one it last used."""
        self.events: list[str] = []
        self.replacements = 0

    def _spawn(self, index: int) -> WorkerHandle:
        return self.runtime.spawn(
            self.worker_cls, self.stage_cfg, self.stages_per_worker, resources=self.resources[index]
        )

    def replace(self, index: int, generation: int, error: BaseException) -> None:
        """Replace worker ``index`` if ``generation`` is still its current one (several stages of
        one dead worker report its death; it is replaced once)."""
        if self.generations[index] != generation:
            return
        with contextlib.suppress(Exception):
            self.runtime.stop(self.workers[index])
        self.workers[index] = self._spawn(index)
        self.generations[index] += 1
        self.replacements += 1
        self.events.append(f"env worker {index} died ({type(error).__name__}); replaced")

    def close(self) -> None:
        self.runtime.stop_all(self.workers, "close")


class RemoteEnv(BatchedEnv):
    """Stage ``stage`` of env worker ``worker`` of ``pool``, as a ``BatchedEnv`` of this process."""

    def __init__(
        self, pool: EnvWorkerPool, worker: int, stage: int, spec: dict[str, Any], first_world: int
    ) -> None:
        self.pool, self.worker, self.stage, self.first_world = pool, worker, stage, first_world
        adopt_spec(self, spec)
        self.generation = pool.generations[worker]
        self._future: Any = None
        self._last_obs: Observation | None = None

    def _run(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Start ``method`` of this stage's env on its worker; returns the future."""
        return self.pool.workers[self.worker].call("run", self.stage, method, *args, **kwargs)

    def world_seed(self, seed: int, world: int) -> int | list[int]:
        return self._run("world_seed", seed, world).result()

    def reset(
        self, seed: int | Sequence[int | list[int]] | None = None, env_ids: torch.Tensor | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        self._last_obs = self._run("reset", seed=seed, env_ids=env_ids).result()[0]
        self.generation = self.pool.generations[self.worker]
        return self._last_obs, {}

    def skip_images_next_step(self) -> None:
        """Passed on without waiting: the worker runs its calls in order, so before the next step (a
        dead worker is found by that step)."""
        self._run("skip_images_next_step")

    def step(self, action: torch.Tensor) -> StepResult:
        self.step_async(action)
        return self.step_wait()

    def step_async(self, action: torch.Tensor) -> None:
        if self._future is not None:
            raise RuntimeError("step_async() called twice without step_wait()")
        # A worker replaced since this stage last ran has lost its state: the step cannot run.
        if self.generation != self.pool.generations[self.worker]:
            self._future = "lost"
        else:
            self._future = (self.generation, self._run("step", action))

    def step_wait(self) -> StepResult:
        pending, self._future = self._future, None
        if pending is None:
            raise RuntimeError("step_wait() without a step_async() first")
        if pending == "lost":
            return self._restart()
        generation, future = pending
        try:
            result = future.result()
        except self.pool.death_errors as error:
            self.pool.replace(self.worker, generation, error)
            return self._restart()
        result.info["lost"] = torch.zeros(self.num_envs, dtype=torch.bool, device=result.reward.device)
        self._last_obs = result.obs
        return result

    def _restart(self) -> StepResult:
        """Fresh episodes on the replacement worker; this step's transitions are marked lost."""
        seed = FRESH_SEED_BASE + self.pool.replacements
        previous = self._last_obs
        obs, _ = self.reset(seed=[[seed, self.first_world + i] for i in range(self.num_envs)])
        no = torch.zeros(self.num_envs, dtype=torch.bool)
        info: dict[str, Any] = {"success": no, "final_obs": previous, "lost": ~no}
        return StepResult(obs, torch.zeros(self.num_envs), no.clone(), ~no, info)

    def state_dict(self) -> dict[str, Any]:
        return self._run("state_dict").result()

    def load_state_dict(self, state: dict[str, Any]) -> Observation:
        self._last_obs = self._run("load_state_dict", state).result()
        return self._last_obs

    def close(self) -> None:
        """The pool closes the workers (several stages share one)."""


class WorkerEnv(StagedEnv):
    """The stages of every worker of ``pool`` as one env (worker ``w``'s stages hold consecutive
    rows); ``close`` ends the workers."""

    def __init__(self, pool: EnvWorkerPool, owns_runtime: bool = False) -> None:
        self.pool = pool
        self.owns_runtime = owns_runtime
        spec = pool.workers[0].call("spec").result()
        per_worker = pool.stages_per_worker
        super().__init__(
            [
                RemoteEnv(
                    pool, worker, stage, spec, first_world=(worker * per_worker + stage) * spec["num_envs"]
                )
                for worker in range(len(pool.workers))
                for stage in range(per_worker)
            ]
        )

    @property
    def events(self) -> list[str]:
        """What happened to the workers (replacements), in order."""
        return self.pool.events

    def close(self) -> None:
        self.pool.close()
        if self.owns_runtime:
            self.pool.runtime.shutdown()


def make_worker_env(
    runtime: Runtime,
    cfg: EnvConfig,
    num_workers: int,
    resources: Resources | Sequence[Resources] | None = None,
    worker_cls: type = EnvWorker,
    owns_runtime: bool = False,
) -> WorkerEnv:
    """``cfg.num_envs`` worlds on ``num_workers`` env workers of ``cfg.pipeline_stages`` stages each;
    with ``owns_runtime`` closing the env also shuts the runtime down."""
    pool = EnvWorkerPool(runtime, cfg, num_workers, cfg.pipeline_stages, resources, worker_cls)
    return WorkerEnv(pool, owns_runtime)


def build_training_env(
    env_cfg: EnvConfig,
    dist_cfg: DistributedConfig,
    runtime: Runtime | None = None,
    worker_cls: type = EnvWorker,
) -> BatchedEnv:
    """The env a training run steps: built here (no env workers, in-process runtime), or spread over
    ``dist_cfg.env_workers`` env workers (at least one with the Ray runtime) on ``runtime`` (made
    from ``dist_cfg`` and shut down with the env when not given)."""
    if dist_cfg.env_workers == 0 and dist_cfg.runtime == "inprocess":
        return make_env(env_cfg)
    owns_runtime = runtime is None
    runtime = runtime or make_training_runtime(dist_cfg)
    workers = max(dist_cfg.env_workers, 1)
    resources = worker_resources(runtime, dist_cfg, "env", workers, dist_cfg.env_worker_cpus)
    return make_worker_env(runtime, env_cfg, workers, resources, worker_cls, owns_runtime=owns_runtime)
