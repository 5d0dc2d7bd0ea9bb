"""Storage of a chunk-policy rollout: one entry per (decision, world), ready for PPO or GRPO.

A *decision* is one call of the policy: it samples an action chunk whose first ``execute_steps``
actions the world then executes open loop. Everything is stored ``[T, N, ...]`` (T decisions of N
worlds) while collecting and flattened to ``[T * N, ...]`` for the updates. ``valid`` marks the
entries that train: all of them in PPO's continuous rollouts, only those before the episode's end
in GRPO's episode rollouts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from vla_rl.envs.base import Observation
from vla_rl.envs.batching import select_worlds
from vla_rl.envs.staged import concat_observations
from vla_rl.rollout.gae import compute_gae


@dataclass
class ChunkBatch:
    """A rollout of T decisions of N worlds (tensors [T, N, ...])."""

    obs: list[Observation] = field(default_factory=list)
    """The observation each decision was made from, one batched entry per decision."""
    sample_info: dict[str, list[torch.Tensor]] = field(default_factory=dict)
    """What ``ChunkPolicy.evaluate`` needs, per key a list of T tensors [N, ...]."""
    log_probs: list[torch.Tensor] = field(default_factory=list)
    """Behaviour log-probabilities at the algorithm's level, T x [N, ...]."""
    values: list[torch.Tensor] = field(default_factory=list)
    """Critic estimates T x [N] (empty without a critic)."""
    rewards: list[torch.Tensor] = field(default_factory=list)
    """Discounted reward of each chunk's executed steps, T x [N]."""
    discounts: list[torch.Tensor] = field(default_factory=list)
    """``gamma ** executed steps``, T x [N]."""
    dones: list[torch.Tensor] = field(default_factory=list)
    """The episode ended during the chunk, T x [N] bool."""
    valid: list[torch.Tensor] = field(default_factory=list)
    """The entry trains, T x [N] bool."""
    step_rewards: list[torch.Tensor] = field(default_factory=list)
    """Rewards of each executed control step, T x [N, execute_steps] (0 where not executed)."""
    executed: list[torch.Tensor] = field(default_factory=list)
    """Which of the chunk's first ``execute_steps`` actions ran in the decision's episode, T x [N, H]."""
    last_value: torch.Tensor | None = None
    """[N] value of the observation after the last decision (PPO bootstrap)."""

    def add(
        self,
        obs: Observation,
        sample_info: dict[str, torch.Tensor],
        log_prob: torch.Tensor,
        value: torch.Tensor | None,
        reward: torch.Tensor,
        discount: torch.Tensor,
        done: torch.Tensor,
        valid: torch.Tensor,
        step_rewards: torch.Tensor | None = None,
        executed: torch.Tensor | None = None,
    ) -> None:
        self.obs.append({k: v.cpu() if isinstance(v, torch.Tensor) else list(v) for k, v in obs.items()})
        for key, tensor in sample_info.items():
            self.sample_info.setdefault(key, []).append(tensor.detach().cpu())
        self.log_probs.append(log_prob.detach().cpu())
        if value is not None:
            self.values.append(value.detach().cpu().float())
        # Copies: callers keep updating their masks in place.
        self.rewards.append(reward.float().cpu().clone())
        self.discounts.append(discount.float().cpu().clone())
        self.dones.append(done.bool().cpu().clone())
        self.valid.append(valid.bool().cpu().clone())
        if step_rewards is not None and executed is not None:
            self.step_rewards.append(step_rewards.float().cpu().clone())
            self.executed.append(executed.bool().cpu().clone())

    @property
    def num_decisions(self) -> int:
        return len(self.obs)

    def stacked(self, name: str) -> torch.Tensor:
        """[T, N, ...] of a per-decision field (``rewards``, ``values``, ...)."""
        return torch.stack(getattr(self, name))

    def gae(self, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Chunk-level GAE -> (advantages, returns) [T, N]; each chunk is one semi-MDP step whose
        successor is discounted by ``gamma ** executed steps``."""
        if not self.values or self.last_value is None:
            raise ValueError("GAE needs the critic's values and the last value")
        return compute_gae(
            self.stacked("rewards"),
            self.stacked("values"),
            self.stacked("dones"),
            self.last_value.float(),
            self.stacked("discounts"),
            lam,
        )

    def step_gae(self, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-step GAE -> (advantages [T, N, H] of every control step, value targets [T, N]).

        The control steps of all chunks form one sequence per world; the value of a decision stands
        for every step of its chunk; an episode's end cuts the sequence at its last executed step.
        Steps a world did not execute (after its episode ended mid-chunk) get advantages that are
        never used. A decision's value target is its first step's advantage plus its value."""
        if not self.step_rewards or not self.values or self.last_value is None:
            raise ValueError("per-step GAE needs the step rewards, the values and the last value")
        rewards, executed = self.stacked("step_rewards"), self.stacked("executed")
        num_decisions, num_worlds, horizon = rewards.shape
        values = self.stacked("values")
        last_executed = (executed.sum(dim=-1) - 1).clamp(min=0)
        step_done = torch.zeros_like(executed)
        step_done.scatter_(-1, last_executed[..., None], self.stacked("dones")[..., None])

        def by_time(x: torch.Tensor) -> torch.Tensor:  # [T, N, H] -> [T * H, N]
            return x.permute(0, 2, 1).reshape(num_decisions * horizon, num_worlds)

        step_values = values[..., None].expand(-1, -1, horizon)
        advantages, _ = compute_gae(
            by_time(rewards), by_time(step_values), by_time(step_done), self.last_value.float(), gamma, lam
        )
        advantages = advantages.view(num_decisions, horizon, num_worlds).permute(0, 2, 1)
        return advantages, advantages[..., 0] + values

    def flat(self, per_entry: dict[str, torch.Tensor]) -> FlatBatch:
        """Everything flattened to [T * N, ...] rows (decision-major), with ``per_entry`` [T, N, ...]
        tensors (advantages, returns, ...) flattened alongside."""
        tensors = {
            "old_log_prob": self.stacked("log_probs").flatten(0, 1),
            "valid": self.stacked("valid").flatten(0, 1),
        }
        if self.values:
            tensors["old_value"] = self.stacked("values").flatten(0, 1)
        if self.executed:
            tensors["executed"] = self.stacked("executed").flatten(0, 1)
        tensors.update({name: value.flatten(0, 1) for name, value in per_entry.items()})
        info = {key: torch.stack(parts).flatten(0, 1) for key, parts in self.sample_info.items()}
        return FlatBatch(concat_observations(self.obs), info, tensors)


@dataclass
class FlatBatch:
    """Rows of a rollout: observations, sample info and per-row tensors of equal length."""

    obs: Observation
    sample_info: dict[str, torch.Tensor]
    tensors: dict[str, torch.Tensor]

    def __len__(self) -> int:
        return len(self.tensors["valid"])

    def rows(self, index: torch.Tensor) -> FlatBatch:
        return FlatBatch(
            select_worlds(self.obs, index),
            {key: value[index] for key, value in self.sample_info.items()},
            {key: value[index] for key, value in self.tensors.items()},
        )

    def valid_rows(self) -> FlatBatch:
        return self.rows(torch.nonzero(self.tensors["valid"]).squeeze(1))

    def sample(self, fraction: float, generator: torch.Generator) -> FlatBatch:
        """A random ``fraction`` of the rows (at least one), in their original order."""
        count = max(1, round(fraction * len(self)))
        return self.rows(torch.randperm(len(self), generator=generator)[:count].sort().values)

    def minibatches(self, num_minibatches: int, generator: torch.Generator) -> Iterator[FlatBatch]:
        """Shuffled, near-equal minibatches covering every row once."""
        order = torch.randperm(len(self), generator=generator)
        for part in order.tensor_split(max(1, min(num_minibatches, len(self)))):
            yield self.rows(part)


def concat_flat(parts: list[FlatBatch]) -> FlatBatch:
    """Rows of several rollouts as one batch (they must carry the same keys)."""
    if not parts:
        raise ValueError("nothing to concatenate")
    return FlatBatch(
        concat_observations([part.obs for part in parts]),
        {key: torch.cat([part.sample_info[key] for part in parts]) for key in parts[0].sample_info},
        {key: torch.cat([part.tensors[key] for part in parts]) for key in parts[0].tensors},
    )


def concat_zero_padded(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Concatenate along dim 0 after zero-padding every later dim (at its end) to the largest size
    among ``tensors``, e.g. per-row prompt features of batches padded to different prompt lengths."""
    sizes = [max(tensor.shape[dim] for tensor in tensors) for dim in range(tensors[0].dim())]
    padded = []
    for tensor in tensors:
        widths = [(0, sizes[dim] - tensor.shape[dim]) for dim in range(tensor.dim() - 1, 0, -1)]
        padded.append(F.pad(tensor, [side for pair in widths for side in pair]))
    return torch.cat(padded)
