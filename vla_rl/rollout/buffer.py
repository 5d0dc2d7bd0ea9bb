"""Preallocated storage of one on-policy rollout, [T, N, ...] per field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs.base import Observation
from vla_rl.rollout.gae import compute_gae

Minibatch = dict[str, Any]
"""``obs`` (dict of [B, ...]), ``actions``, ``log_probs``, ``values``, ``advantages``,
``returns``, ``means``, ``stds``, ``valid`` — all flattened over (time, world)."""


def _tensor_keys(observation_space: gym.spaces.Dict) -> list[str]:
    return [key for key, space in observation_space.spaces.items() if isinstance(space, gym.spaces.Box)]


class RolloutBuffer:
    """Transitions of ``num_steps`` steps of ``num_envs`` worlds.

    Observation keys keep their space's dtype (images stay uint8). Only Box keys are stored;
    ``obs_keys`` narrows them to what the policy reads.
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        observation_space: gym.spaces.Dict,
        action_dim: int,
        device: str | torch.device = "cpu",
        obs_keys: list[str] | None = None,
    ) -> None:
        self.num_steps = num_steps
        self.num_envs = num_envs
        self.device = torch.device(device)
        keys = _tensor_keys(observation_space) if obs_keys is None else list(obs_keys)
        self.obs: dict[str, torch.Tensor] = {}
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
        """Critic value of the observation after the last step (set by the collector)."""
        self.step = 0

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
        flat = {
            "actions": self.actions.flatten(0, 1),
            "log_probs": self.log_probs.flatten(0, 1),
            "values": self.values.flatten(0, 1),
            "advantages": self.advantages.flatten(0, 1),
            "returns": self.returns.flatten(0, 1),
            "means": self.means.flatten(0, 1),
            "stds": self.stds.flatten(0, 1),
            "valid": self.valid.flatten(0, 1),
        }
        flat_obs = {key: value.flatten(0, 1) for key, value in self.obs.items()}
        for i in range(num_minibatches):
            idx = permutation[i * size : (i + 1) * size]
            minibatch: Minibatch = {name: value[idx] for name, value in flat.items()}
            minibatch["obs"] = {key: value[idx] for key, value in flat_obs.items()}
            yield minibatch
