"""The storage of one on-policy rollout, [T, N, ...] per field: T steps of a state policy, or T
decisions of a chunk policy (a decision samples an action chunk whose first ``execute_steps`` actions a
world then executes open loop; a state policy is the case of one action per decision).

A state rollout (``RolloutBuffer(T, N, observation_space, action_dim)``) is allocated up front and
filled step by step (``store``/``add``); PPO reads it in ``minibatches`` after ``compute_returns``.
A chunk rollout (``RolloutBuffer(T, N)``) allocates each field on its first ``add_decision`` from
the shape of what the policy sampled, and may stop before T (GRPO's episodes end when every world's
has): ``num_decisions`` entries are filled. Chunk algorithms read ``gae``/``step_gae`` and ``flat``.
``valid`` marks the entries that train: all but a lost worker's in state rollouts, all in chunk PPO's
continuous rollouts, only those before the episode's end in GRPO's episode rollouts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs.base import Observation
from vla_rl.rollout.flat_batch import FlatBatch
from vla_rl.rollout.gae import compute_gae

Minibatch = dict[str, Any]
"""``obs`` (dict of [B, ...]), ``actions``, ``log_probs``, ``values``, ``advantages``,
``returns``, ``means``, ``stds``, ``valid`` — all flattened over (time, world)."""


def _tensor_keys(observation_space: gym.spaces.Dict) -> list[str]:
    return [key for key, space in observation_space.spaces.items() if isinstance(space, gym.spaces.Box)]


class RolloutBuffer:
    """Entries of ``num_steps`` steps (or decisions) of ``num_envs`` worlds.

    With an ``observation_space`` (a state rollout), every field is allocated now: observation keys
    keep their space's dtype (images stay uint8), only Box keys are stored and ``obs_keys`` narrows
    them to what the policy reads. Without one (a chunk rollout), each field is allocated on its first
    write with the dtype and shape of the written value; observation entries that are not tensors
    (instructions) are kept as lists.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        observation_space: gym.spaces.Dict | None = None,
        action_dim: int | None = None,
        device: str | torch.device = "cpu",
        obs_keys: list[str] | None = None,
    ) -> None:
        self.num_steps = num_steps
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.step = 0
        """Entries filled (the next ``add`` writes there)."""
        self.obs: dict[str, torch.Tensor] = {}
        self.obs_lists: dict[str, list[list[Any]]] = {}
        """Observation entries that are not tensors, one list per decision (chunk rollouts)."""
        self.sample_info: dict[str, torch.Tensor] = {}
        """What ``ChunkPolicy.evaluate`` needs of each decision, per key [T, N, ...] (chunk rollouts)."""
        self.values: torch.Tensor | None = None
        """Critic estimates [T, N] (None in a chunk rollout without a critic)."""
        self.discounts: torch.Tensor | None = None
        """``gamma ** executed steps`` of each chunk [T, N] (chunk rollouts)."""
        self.step_rewards: torch.Tensor | None = None
        """Rewards of each executed control step, [T, N, execute_steps] (0 where not executed)."""
        self.executed: torch.Tensor | None = None
        """Which of the chunk's first ``execute_steps`` actions ran in the decision's episode [T, N, H]."""
        self.last_value: torch.Tensor | None = None
        """[N] critic value of the observation after the last step (set by the collector)."""
        self.lost = torch.zeros(num_envs, dtype=torch.bool)
        """bool [N]: worlds whose episode a dead env worker cut short (episode rollouts; GRPO leaves
        their groups out)."""
        if observation_space is None:
            return
        if action_dim is None:
            raise ValueError("a state rollout needs the action_dim besides the observation_space")
        keys = _tensor_keys(observation_space) if obs_keys is None else list(obs_keys)
        for key in keys:
            space = observation_space[key]
            dtype = torch.from_numpy(np.zeros((), dtype=space.dtype)).dtype
            self.obs[key] = torch.zeros((num_steps, num_envs, *space.shape), dtype=dtype, device=self.device)

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros((num_steps, num_envs, *shape), dtype=torch.float32, device=self.device)

        self.actions = zeros(action_dim)
        self.means = zeros(action_dim)
        self.stds = zeros(action_dim)
        self.log_probs = zeros()
        self.values = zeros()
        self.rewards = zeros()
        self.dones = torch.zeros((num_steps, num_envs), dtype=torch.bool, device=self.device)
        self.valid = torch.ones((num_steps, num_envs), dtype=torch.bool, device=self.device)
        """False for transitions whose step never ran (a replaced env worker's); losses skip them."""
        self.advantages = zeros()
        self.returns = zeros()
        self.last_value = torch.zeros(num_envs, dtype=torch.float32, device=self.device)

    @property
    def batch_size(self) -> int:
        return self.num_steps * self.num_envs

    @property
    def full(self) -> bool:
        return self.step >= self.num_steps

    def clear(self) -> None:
        self.step = 0
        self.valid.fill_(True)

    def add(self, obs: Observation, *fields: torch.Tensor, **named_fields: torch.Tensor) -> None:
        """Store the next step of all worlds; the fields are those of ``store`` after ``obs``
        (action, log_prob, value, reward, done, mean, std), by position or name."""
        if self.full:
            raise RuntimeError(f"rollout buffer is full ({self.num_steps} steps); call clear()")
        self.store(self.step, slice(None), obs, *fields, **named_fields)
        self.step += 1

    def store(
        self,
        t: int,
        rows: slice,
        obs: Observation,
        action: torch.Tensor,
        log_prob: torch.Tensor,
        value: torch.Tensor,
        reward: torch.Tensor,
        done: torch.Tensor,
        mean: torch.Tensor,
        std: torch.Tensor,
    ) -> None:
        """Write step ``t`` of the worlds ``rows``. ``reward`` should already include any truncation
        bootstrap. (A pipelined rollout fills each step stage by stage and sets ``step`` when all
        are in.)"""
        for key, storage in self.obs.items():
            storage[t, rows].copy_(obs[key])
        self.actions[t, rows].copy_(action)
        self.log_probs[t, rows].copy_(log_prob)
        self.values[t, rows].copy_(value)
        self.rewards[t, rows].copy_(reward)
        self.dones[t, rows].copy_(done)
        self.means[t, rows].copy_(mean)
        self.stds[t, rows].copy_(std)

    STORED = ("actions", "means", "stds", "log_probs", "values", "rewards", "dones", "valid", "last_value")
    """The fields a collection fills, besides the observations."""

    def export(self) -> dict[str, Any]:
        """A copy of the collected rollout (to ship to a learner elsewhere)."""
        data: dict[str, Any] = {name: getattr(self, name).clone() for name in self.STORED}
        data["obs"] = {key: value.clone() for key, value in self.obs.items()}
        return data

    def load(self, data: dict[str, Any]) -> None:
        """Fill this buffer with an ``export``ed rollout of the same shapes, marked full."""
        for name in self.STORED:
            getattr(self, name).copy_(data[name])
        for key, storage in self.obs.items():
            storage.copy_(data["obs"][key])
        self.step = self.num_steps

    def compute_returns(self, last_value: torch.Tensor, gamma: float, lam: float) -> None:
        """Fill ``advantages`` and ``returns`` with GAE."""
        self.advantages, self.returns = compute_gae(
            self.rewards, self.values, self.dones, last_value.to(self.device), gamma, lam
        )

    MINIBATCH_FIELDS = ("actions", "log_probs", "values", "advantages", "returns", "means", "stds", "valid")
    """The fields a minibatch carries besides the observations (``Minibatch``)."""

    def minibatches(
        self, num_minibatches: int, generator: torch.Generator | None = None
    ) -> Iterator[Minibatch]:
        """One shuffled pass over all transitions in ``num_minibatches`` equal-size batches
        (the remainder of an uneven split is dropped)."""
        batch = self.batch_size
        size = batch // num_minibatches
        if size == 0:
            raise ValueError(f"{num_minibatches} minibatches is more than the {batch} transitions")
        permutation = torch.randperm(batch, generator=generator).to(self.device)
        flat = {name: getattr(self, name).flatten(0, 1) for name in self.MINIBATCH_FIELDS}
        flat_obs = {key: value.flatten(0, 1) for key, value in self.obs.items()}
        for i in range(num_minibatches):
            idx = permutation[i * size : (i + 1) * size]
            minibatch: Minibatch = {name: value[idx] for name, value in flat.items()}
            minibatch["obs"] = {key: value[idx] for key, value in flat_obs.items()}
            yield minibatch

    # ----- chunk rollouts ---------------------------------------------------------------------------

    def add_decision(
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
        """Store the next decision of all worlds: what it was made from and sampled, its chunk reward
        and discount (``gae.chunk_rewards``), whether the episode ended in it and whether it trains."""
        if self.full:
            raise RuntimeError(f"rollout buffer is full ({self.num_steps} decisions)")
        t = self.step
        for key, entry in obs.items():
            if isinstance(entry, torch.Tensor):
                self._put(self.obs, key, t, entry)
            else:
                self.obs_lists.setdefault(key, []).append(list(entry))
        for key, tensor in sample_info.items():
            self._put(self.sample_info, key, t, tensor.detach())
        fields = {"log_probs": log_prob.detach(), "rewards": reward.float(), "discounts": discount.float()}
        fields.update(dones=done.bool(), valid=valid.bool())
        if value is not None:
            fields["values"] = value.detach().float()
        if step_rewards is not None and executed is not None:
            fields.update(step_rewards=step_rewards.float(), executed=executed.bool())
        for name, tensor in fields.items():
            self._put(self.__dict__, name, t, tensor)
        self.step += 1

    def _put(self, fields: dict[str, Any], name: str, t: int, value: torch.Tensor) -> None:
        """Write entry ``t`` of field ``name`` of ``fields``, allocating it on its first write."""
        storage = fields.get(name)
        if storage is None:
            shape = (self.num_steps, self.num_envs, *value.shape[1:])
            storage = fields[name] = torch.zeros(shape, dtype=value.dtype, device=self.device)
        storage[t].copy_(value)

    @property
    def num_decisions(self) -> int:
        return self.step

    def stacked(self, name: str) -> torch.Tensor:
        """[T, N, ...] of the filled entries of a field (``rewards``, ``values``, ...), a copy."""
        return getattr(self, name)[: self.step].clone()

    def gae(self, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Chunk-level GAE -> (advantages, returns) [T, N]; each chunk is one semi-MDP step whose
        successor is discounted by ``gamma ** executed steps``."""
        if self.values is None or self.last_value is None:
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
        if self.step_rewards is None or self.values is None or self.last_value is None:
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
        """The filled entries flattened to [T * N, ...] rows (decision-major), with ``per_entry``
        [T, N, ...] tensors (advantages, returns, ...) flattened alongside."""
        tensors = {
            "old_log_prob": self.stacked("log_probs").flatten(0, 1),
            "valid": self.stacked("valid").flatten(0, 1),
        }
        if self.values is not None:
            tensors["old_value"] = self.stacked("values").flatten(0, 1)
        if self.executed is not None:
            tensors["executed"] = self.stacked("executed").flatten(0, 1)
        tensors.update({name: value.flatten(0, 1) for name, value in per_entry.items()})
        info = {key: value[: self.step].flatten(0, 1).clone() for key, value in self.sample_info.items()}
        obs: Observation = {key: value[: self.step].flatten(0, 1).clone() for key, value in self.obs.items()}
        obs.update(
            {key: [item for entry in entries for item in entry] for key, entries in self.obs_lists.items()}
        )
        return FlatBatch(obs, info, tensors)
