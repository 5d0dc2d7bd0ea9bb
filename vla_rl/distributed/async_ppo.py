"""Asynchronous PPO: rollout workers collect with the weights they were last sent while the learner
updates on rollouts that came back, with a bound on how stale those may be.

``vla-rl train distributed.rollout_workers=W distributed.max_staleness=S`` selects it: the state PPO
trainer (``vla_rl.training.runner``) takes its batches from ``AsyncRollouts`` instead of a local
rollout, and everything else (the update, checkpoints, resume, logging) is the one loop's.

Each ``RolloutWorker`` holds an env, a copy of the policy and a collector (env and inference
collocated), built as the single-process run builds them. The learner keeps one collection in flight
per worker (the bounded queue: at most W rollouts exist that the learner has not consumed) and takes
them back in the order it started them. Every rollout carries the policy version it was collected
with; its staleness is the number of updates the learner has made when it is consumed minus that.
A rollout staler than S is dropped (and counted), never learned from. After consuming (or dropping)
a worker's rollout, the learner sends that worker its current weights (versioned, checksummed) and
starts its next collection. PPO's importance ratio uses the log-probabilities stored at collection,
so a rollout one or two versions old is still a valid (clipped) off-policy update.

With W workers taken back in start order, staleness settles at W - 1. The schedule does not depend
on timing, so the in-process runtime (calls run when made) and Ray (calls run concurrently) give
the same run; only Ray overlaps collection with learning.
"""

from __future__ import annotations

import collections
from concurrent.futures import Future
from typing import Any

import torch

from vla_rl.config.schema import TrainConfig
from vla_rl.distributed.layout import worker_resources
from vla_rl.distributed.runtime import Runtime, WorkerHandle
from vla_rl.distributed.weights import VersionedWeights, broadcast_weights, cpu_state
from vla_rl.envs.base import env_spec
from vla_rl.envs.registry import make_env
from vla_rl.policies import ActorCriticPolicy
from vla_rl.rewards.env_wrapper import wrap_with_reward_model
from vla_rl.rollout import RolloutBuffer
from vla_rl.training.components import build_training_components
from vla_rl.training.sources import Rollouts

WORKER_SEED_STRIDE = 1_000
"""Rollout worker k resets its env from, and samples actions with, ``seed + WORKER_SEED_STRIDE * (k + 1)``."""


class RolloutWorker(VersionedWeights):
    """An env, a policy copy and a collector, continuing one rollout across collections. Its action
    sampling uses its own torch RNG stream, so it draws the same actions whether it runs in the
    learner's process or in its own."""

    def __init__(self, cfg: TrainConfig, index: int) -> None:
        self.env = wrap_with_reward_model(make_env(cfg.env), cfg.reward)
        parts = build_training_components(cfg, self.env)
        self.policy, self.buffer = parts.policy, parts.buffer
        self.policy.eval()
        seed = cfg.seed + WORKER_SEED_STRIDE * (index + 1)
        self.rollouts = Rollouts(self.env, parts.collector, seed)
        self.rng_state = torch.Generator().manual_seed(seed).get_state()
        self.collections = 0

    def spec(self) -> dict[str, Any]:
        return env_spec(self.env)

    def collect(self) -> dict[str, Any]:
        """One rollout with the weights last loaded: its data (``RolloutBuffer.export``), their
        ``policy_version`` and the rollout's ``metrics``. The learner owns the observation
        statistics (they travel with the weights)."""
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.rng_state)
            buffer, metrics = self.rollouts.next_batch()
            self.rng_state = torch.get_rng_state()
        self.collections += 1
        return {"data": buffer.export(), "policy_version": self.weights_version_loaded, "metrics": metrics}

    def state_dict(self) -> dict[str, Any]:
        """What a resumed worker needs to go on as this one would: the rollout's state (env, reward
        scaler) and the RNG stream. Its weights are not kept: a worker collects again only after the
        learner has sent it new ones."""
        return {**self.rollouts.state_dict(), "rng": self.rng_state, "iteration": self.collections}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rollouts.load_state_dict(state)
        self.rng_state, self.collections = state["rng"], state["iteration"]

    def close(self) -> None:
        self.env.close()


def spawn_rollout_workers(cfg: TrainConfig, runtime: Runtime) -> tuple[list[WorkerHandle], dict[str, Any]]:
    """``cfg.distributed.rollout_workers`` rollout workers on ``runtime`` (each asks for
    ``distributed.env_worker_cpus``) and their env's spec (``envs.base.env_spec``)."""
    dcfg = cfg.distributed
    resources = worker_resources(runtime, dcfg, "env", dcfg.rollout_workers, dcfg.env_worker_cpus)
    workers = [
        runtime.spawn(RolloutWorker, cfg, k, resources=resources[k]) for k in range(dcfg.rollout_workers)
    ]
    return workers, workers[0].call("spec").result()


def _done(value: Any) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class AsyncRollouts:
    """The batch source of asynchronous PPO (``next_batch() -> (buffer, metrics)``, with a state to
    resume): the next rollout in start order that is at most ``max_staleness`` updates old, loaded
    into the learner's ``buffer``. Each call first sends the worker consumed last the weights its
    batch was just used to make, and starts its next collection."""

    def __init__(
        self,
        runtime: Runtime,
        workers: list[WorkerHandle],
        policy: ActorCriticPolicy,
        buffer: RolloutBuffer,
        max_staleness: int,
    ) -> None:
        self.runtime, self.workers, self.policy, self.buffer = runtime, workers, policy, buffer
        self.max_staleness = max_staleness
        self.in_flight: collections.deque[tuple[int, Future]] = collections.deque()
        """``(worker, future of its rollout)`` in start order."""
        self.batches = 0
        """Batches handed out: the learner's updates (its weights' version) when the next call runs."""
        self.consumed: int | None = None
        """The worker whose rollout was handed out last; it starts again on the next call."""
        self.dropped = 0
        self.started = False

    def _restart(self, worker: int) -> None:
        broadcast_weights(self.runtime, [self.workers[worker]], cpu_state(self.policy), self.batches)
        self.in_flight.append((worker, self.workers[worker].call("collect")))

    def next_batch(self) -> tuple[RolloutBuffer, dict[str, float]]:
        if not self.started:
            self.started = True
            for worker in range(len(self.workers)):
                self._restart(worker)
        elif self.consumed is not None:
            self._restart(self.consumed)
        while True:
            worker, future = self.in_flight.popleft()
            rollout = future.result()
            staleness = self.batches - rollout["policy_version"]
            if staleness <= self.max_staleness:
                break
            self.dropped += 1
            self._restart(worker)
        self.buffer.load(rollout["data"])
        self.consumed = worker
        self.batches += 1
        return self.buffer, {
            **rollout["metrics"],
            "async/staleness": float(staleness),
            "async/policy_version": float(rollout["policy_version"]),
            "async/worker": float(worker),
            "async/dropped": float(self.dropped),
        }

    def state_dict(self) -> dict[str, Any]:
        """Waits for the collections in flight (their rollouts go into the state, and this run goes
        on with them as a resumed one will) and takes every worker's state."""
        pending = [(worker, future.result()) for worker, future in self.in_flight]
        self.in_flight = collections.deque((worker, _done(rollout)) for worker, rollout in pending)
        return {
            "async": {
                "pending": [{"worker": worker, **rollout} for worker, rollout in pending],
                "workers": self.runtime.gather([worker.call("state_dict") for worker in self.workers]),
                "batches": self.batches,
                "consumed": -1 if self.consumed is None else self.consumed,
                "dropped": self.dropped,
                "started": self.started,
            }
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state["async"]
        states = zip(self.workers, saved["workers"], strict=True)
        self.runtime.gather([worker.call("load_state_dict", state) for worker, state in states])
        self.in_flight = collections.deque(
            (entry["worker"], _done({k: v for k, v in entry.items() if k != "worker"}))
            for entry in saved["pending"]
        )
        self.batches, self.dropped, self.started = saved["batches"], saved["dropped"], saved["started"]
        self.consumed = None if saved["consumed"] < 0 else saved["consumed"]

    def close(self) -> None:
        self.runtime.stop_all(self.workers, "close")
