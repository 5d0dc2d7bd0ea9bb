"""Asynchronous PPO: rollout workers collect with the weights they were last sent while the learner
updates on rollouts that came back, with a bound on how stale those may be.

Each ``RolloutWorker`` holds an env, a copy of the policy and a collector (env and inference
collocated). The learner keeps one collection in flight per worker (the bounded queue: at most
``rollout_workers`` rollouts exist that the learner has not consumed) and takes them back in the
order it started them. Every rollout carries the policy version it was collected with; its
staleness is the learner's version when it is consumed minus that. A rollout staler than
``max_staleness`` is dropped (and counted), never learned from. After consuming (or dropping) a
worker's rollout, the learner sends that worker its current weights (versioned, checksummed) and
starts its next collection. PPO's importance ratio uses the log-probabilities stored at collection,
so a rollout one or two versions old is still a valid (clipped) off-policy update.

With W workers taken back in start order, staleness settles at W - 1. The schedule does not depend
on timing, so the in-process runtime (calls run when made) and Ray (calls run concurrently) give
the same run; only Ray overlaps collection with learning.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from vla_rl.config.schema import TrainConfig
from vla_rl.distributed.runtime import Resources, Runtime
from vla_rl.distributed.weights import VersionedWeights, broadcast_weights, cpu_state
from vla_rl.envs.base import env_spec
from vla_rl.envs.registry import make_env
from vla_rl.rollout import RolloutCollector
from vla_rl.rollout.stats import RolloutStats
from vla_rl.training.components import build_learner


@dataclass
class AsyncConfig:
    rollout_workers: int = 2
    """Rollout workers, each with ``env.num_envs`` worlds: also how many rollouts can be in flight."""
    max_staleness: int = 1
    """Policy versions a rollout may lag the learner when consumed; staler ones are dropped."""


@dataclass
class Rollout:
    data: dict[str, Any]
    """``RolloutBuffer.export()`` of the collection."""
    policy_version: int
    stats: RolloutStats
    worker: int


class RolloutWorker(VersionedWeights):
    """An env, a policy copy and a collector. Its action sampling uses its own torch RNG stream,
    so it draws the same actions whether it runs in the learner's process or in its own."""

    def __init__(self, cfg: TrainConfig, index: int) -> None:
        self.index = index
        self.env = make_env(cfg.env)
        self.policy, self.buffer, _ = build_learner(
            cfg,
            self.env.observation_space,
            self.env.action_space,
            self.env.num_envs,
            self.env.device,
            self.env.action_scale,
        )
        self.policy.eval()
        self.collector = RolloutCollector(self.env, self.policy, self.buffer, cfg.algorithm.gamma)
        seed = cfg.seed + 1_000 * (index + 1)
        self.obs, _ = self.env.reset(seed=seed)
        self.rng_state = torch.Generator().manual_seed(seed).get_state()

    def spec(self) -> dict[str, Any]:
        return env_spec(self.env)

    def collect(self) -> Rollout:
        """One rollout with the weights last loaded (their version goes with it)."""
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(self.rng_state)
            # The learner owns the observation statistics (they travel with the weights).
            self.obs, stats = self.collector.collect(self.obs)
            self.rng_state = torch.get_rng_state()
        return Rollout(self.buffer.export(), self.weights_version_loaded, stats, self.index)

    def close(self) -> None:
        self.env.close()


@dataclass
class AsyncResult:
    history: list[dict[str, float]] = field(default_factory=list)
    """Per update: the consumed rollout's statistics, staleness and the losses."""
    dropped: int = 0
    """Rollouts dropped as staler than ``max_staleness``."""


class AsyncPPO:
    """The learner of asynchronous PPO over ``cfg.rollout_workers`` rollout workers on ``runtime``."""

    def __init__(
        self, cfg: TrainConfig, async_cfg: AsyncConfig, runtime: Runtime, resources: Resources | None = None
    ) -> None:
        if async_cfg.rollout_workers < 1 or async_cfg.max_staleness < 0:
            raise ValueError("rollout_workers must be >= 1 and max_staleness >= 0")
        self.cfg, self.async_cfg, self.runtime = cfg, async_cfg, runtime
        self.workers = [
            runtime.spawn(RolloutWorker, cfg, k, resources=resources)
            for k in range(async_cfg.rollout_workers)
        ]
        spec = self.workers[0].call("spec").result()
        torch.manual_seed(cfg.seed)  # the same initial weights whether the workers ran here or not
        self.policy, self.buffer, self.algorithm = build_learner(
            cfg,
            spec["observation_space"],
            spec["action_space"],
            spec["num_envs"],
            "cpu",
            spec["action_scale"],
        )
        self.version = 0

    def _send_weights(self, worker: int) -> None:
        broadcast_weights(self.runtime, [self.workers[worker]], cpu_state(self.policy), self.version)

    def train(self, updates: int) -> AsyncResult:
        """Run until ``updates`` rollouts have been learned from."""
        result = AsyncResult()
        in_flight: collections.deque = collections.deque()
        for worker in range(len(self.workers)):
            self._send_weights(worker)
            in_flight.append((worker, self.workers[worker].call("collect")))
        while len(result.history) < updates:
            worker, future = in_flight.popleft()
            rollout: Rollout = future.result()
            staleness = self.version - rollout.policy_version
            if staleness > self.async_cfg.max_staleness:
                result.dropped += 1
            else:
                result.history.append(self._learn(rollout, staleness))
            self._send_weights(worker)
            in_flight.append((worker, self.workers[worker].call("collect")))
        self.runtime.gather([future for _, future in in_flight])  # let the last collections finish
        return result

    def _learn(self, rollout: Rollout, staleness: int) -> dict[str, float]:
        self.buffer.load(rollout.data)
        losses = self.algorithm.update(self.buffer)
        self.version += 1
        stats = rollout.stats
        metrics = {f"train/{name}": value for name, value in losses.items()}
        metrics.update(
            {
                "async/staleness": float(staleness),
                "async/policy_version": float(rollout.policy_version),
                "async/worker": float(rollout.worker),
                "rollout/mean_return": stats.mean_return,
                "rollout/success_rate": stats.success_rate,
                "rollout/episodes": float(stats.episodes),
            }
        )
        return {k: v for k, v in metrics.items() if not (isinstance(v, float) and math.isnan(v))}

    def close(self) -> None:
        self.runtime.stop_all(self.workers, "close")
