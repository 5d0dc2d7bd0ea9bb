"""Batch sources of the training loop: ``next_batch() -> (batch, metrics)``, with a state to resume.

* ``Rollouts``: a continuous rollout of a state or chunk policy into the collector's ``RolloutBuffer``
  (state and chunk PPO).
* ``GroupRollouts``: GRPO's episodes from shared group seeds (fresh ones, or a curriculum's),
  sampled in rounds until enough groups are informative (dynamic sampling).
* ``DemoBatches``: the minibatches of one SFT optimizer step, drawn from the demonstrations.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import torch

from vla_rl.envs.base import BatchedEnv
from vla_rl.rollout import RolloutBuffer, RolloutCollector, collect_episodes
from vla_rl.rollout.seed_curriculum import SeedCurriculum
from vla_rl.rollout.stats import merge_stats, stats_metrics

log = logging.getLogger(__name__)

GROUP_SEED_STRIDE = 7919
"""Without a curriculum, group k of the run resets from ``seed * GROUP_SEED_STRIDE**2 + k``."""


def env_state(env: BatchedEnv) -> dict[str, Any] | None:
    """The env's snapshot, or None where the backend cannot take one."""
    try:
        return env.state_dict()
    except NotImplementedError:
        return None


class Rollouts:
    """A continuous rollout of every world, state policy or chunk policy: the collector's
    ``num_decisions`` decisions (a state policy's buffer fixes them), continuing from the last
    observation (episodes go on across rollouts, and across a resume where the env can snapshot
    its state)."""

    def __init__(
        self, env: BatchedEnv, collector: RolloutCollector, seed: int, num_decisions: int | None = None
    ) -> None:
        self.env, self.collector, self.seed, self.num_decisions = env, collector, seed, num_decisions
        self.obs, _ = env.reset(seed=seed)

    def next_batch(self) -> tuple[RolloutBuffer, dict[str, float]]:
        self.obs, stats = self.collector.collect(self.obs, self.num_decisions)
        return self.collector.buffer, stats_metrics(stats)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"env": env_state(self.env)}
        if self.collector.chunked:
            state["potential"] = self.collector.potential.clone()
        if self.collector.reward_scaler is not None:
            state["reward_scaler"] = self.collector.reward_scaler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("env") is not None:
            self.obs = self.env.load_state_dict(state["env"])
        elif not self.collector.chunked:
            # (A chunk rollout goes on from the fresh episodes its worlds were reset to.)
            log.warning("the environment cannot snapshot its state; resuming from fresh episodes")
            self.obs, _ = self.env.reset(seed=self.seed + int(state["iteration"]))
        if state.get("potential") is not None:
            self.collector.potential = state["potential"].clone()
        if self.collector.reward_scaler is not None and "reward_scaler" in state:
            self.collector.reward_scaler.load_state_dict(state["reward_scaler"])


class GroupRollouts(Rollouts):
    """GRPO's batch: rounds of one episode per world, ``group_size`` worlds per group resetting from
    one group seed, until ``groups_per_update`` groups (default: one round's) were informative or
    ``max_sampling_rounds`` rounds ran. ``grouped_rows(batch, success, returns)`` is the
    algorithm's: it scores the groups and keeps the informative ones' decisions."""

    def __init__(
        self,
        env: BatchedEnv,
        collector: RolloutCollector,
        cfg: Any,
        seed: int,
        grouped_rows: Callable[[RolloutBuffer, torch.Tensor, torch.Tensor], Any],
    ) -> None:
        super().__init__(env, collector, seed)
        self.cfg, self.grouped_rows = cfg, grouped_rows
        self.curriculum = SeedCurriculum(cfg.curriculum_pool, seed) if cfg.curriculum_pool > 0 else None
        self.group_counter = 0

    def next_batch(self) -> tuple[list[Any], dict[str, float]]:
        cfg = self.cfg
        groups_per_rollout = self.env.num_envs // cfg.group_size
        wanted = cfg.groups_per_update or groups_per_rollout
        max_decisions = math.ceil(self.env.max_episode_steps / cfg.execute_steps) + 1
        rollouts, all_stats, kept = [], [], 0
        for _ in range(cfg.max_sampling_rounds):
            group_seeds = self.group_seeds(groups_per_rollout)
            seeds = [self.env.world_seed(seed, 0) for seed in group_seeds for _ in range(cfg.group_size)]
            batch, success, returns, stats = collect_episodes(self.collector, seeds, max_decisions)
            if self.curriculum is not None:
                group_success = success.float().view(-1, cfg.group_size).mean(dim=1).tolist()
                self.curriculum.update(group_seeds, group_success)
            grouped = self.grouped_rows(batch, success, returns)
            rollouts.append(grouped)
            all_stats.append(stats)
            kept += grouped.kept_groups
            if kept >= wanted:
                break
        metrics = stats_metrics(merge_stats(all_stats))
        metrics["train/sampling_rounds"] = float(len(rollouts))
        return rollouts, metrics

    def group_seeds(self, count: int) -> list[int]:
        """Fresh seeds (distinct for every group of the run), or draws from the curriculum's pool."""
        if self.curriculum is not None:
            return self.curriculum.draw(count)
        first = self.seed * GROUP_SEED_STRIDE**2 + self.group_counter
        self.group_counter += count
        return list(range(first, first + count))

    def state_dict(self) -> dict[str, Any]:
        curriculum = None if self.curriculum is None else self.curriculum.state_dict()
        return {**super().state_dict(), "group_counter": self.group_counter, "curriculum": curriculum}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.group_counter = int(state.get("group_counter", 0))
        if self.curriculum is not None and state.get("curriculum") is not None:
            self.curriculum.load_state_dict(state["curriculum"])


class DemoBatches:
    """The ``grad_accum_steps`` minibatches of one optimizer step, from a ``ChunkSampler`` (its own
    generator: drawing them together draws the same ones as drawing them one by one)."""

    def __init__(self, sampler: Any, grad_accum_steps: int) -> None:
        self.sampler, self.grad_accum_steps = sampler, grad_accum_steps

    def next_batch(self) -> tuple[list[Any], dict[str, float]]:
        batches = [self.sampler.next_batch() for _ in range(self.grad_accum_steps)]
        return batches, {"train/epoch": float(self.sampler.epoch)}

    def state_dict(self) -> dict[str, Any]:
        return {"sampler": self.sampler.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state["sampler"])
