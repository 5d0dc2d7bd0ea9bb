"""How a policy acts in an evaluation: one action per world and step, whatever the policy's kind.

Every policy is a chunk policy (a state policy's chunk is one action): it plans a chunk and executes
its first actions open loop (``ChunkExecutor``), or averages every plan made for the step
(``TemporalEnsembleExecutor``). Each keeps its own per-world state, which
``episodes_ended`` clears for worlds whose episode just restarted (autoreset), so a plan never
leaks into the next episode.
"""

from __future__ import annotations

from typing import Protocol

import torch

from vla_rl.envs.base import Observation
from vla_rl.envs.batching import module_device, obs_to_device, select_worlds
from vla_rl.policies.chunk_policy import ChunkPolicy


class Executor(Protocol):
    """A policy acting in a batched env."""

    def act(self, obs: Observation) -> torch.Tensor:
        """Actions [N, action_dim] in [-1, 1] for the current observation of every world."""

    def episodes_ended(self, done: torch.Tensor) -> None:
        """Hear of the bool [N] mask of worlds whose episode just ended (before the next ``act``)."""


class ChunkExecutor:
    """Turns a chunk policy into one action per world and step (open loop within a chunk)."""

    def __init__(
        self,
        policy: ChunkPolicy,
        num_envs: int,
        execute_steps: int,
        deterministic: bool = True,
        temperature: float = 1.0,
    ) -> None:
        self.policy = policy
        self.execute_steps = min(execute_steps, policy.chunk_len) if execute_steps > 0 else policy.chunk_len
        self.deterministic = deterministic
        self.temperature = temperature
        self.plan = torch.zeros(num_envs, policy.chunk_len, policy.action_dim)
        self.cursor = torch.full((num_envs,), self.execute_steps, dtype=torch.long)
        """Index of the next action of each world's plan; ``execute_steps`` means "re-plan"."""

    def act(self, obs: Observation) -> torch.Tensor:
        """Actions [N, action_dim] in [-1, 1] for the current observation of every world."""
        replan = torch.nonzero(self.cursor >= self.execute_steps).squeeze(1)
        if len(replan) > 0:
            subset = obs_to_device(select_worlds(obs, replan), module_device(self.policy))
            step = self.policy.sample(subset, temperature=self.temperature, deterministic=self.deterministic)
            self.plan[replan] = step.actions.detach().float().cpu()
            self.cursor[replan] = 0
        actions = self.plan[torch.arange(len(self.cursor)), self.cursor]
        self.cursor += 1
        return actions.clamp(-1.0, 1.0)

    def episodes_ended(self, done: torch.Tensor) -> None:
        """Drop the rest of the plan of worlds whose episode ended (they start a new one)."""
        self.cursor[done.cpu()] = self.execute_steps


class TemporalEnsembleExecutor:
    """Temporal ensembling (as in ACT): ask the policy for a chunk at every step and execute, per
    world, the weighted mean of every prediction made for this step by the chunks of the last
    ``chunk_len`` steps; a prediction made ``age`` steps ago weighs ``exp(decay * age)`` (decay > 0
    trusts older plans more, 0 is a plain mean). Same interface as ``ChunkExecutor``."""

    def __init__(
        self,
        policy: ChunkPolicy,
        num_envs: int,
        decay: float,
        deterministic: bool = True,
        temperature: float = 1.0,
    ) -> None:
        self.policy = policy
        self.deterministic = deterministic
        self.temperature = temperature
        self.age_weights = torch.exp(decay * torch.arange(policy.chunk_len, dtype=torch.float32))
        """[chunk_len]: weight of a chunk's k-th action, which is executed k steps after the plan."""
        self.weighted_sum = torch.zeros(num_envs, policy.chunk_len, policy.action_dim)
        """[N, k, A]: sum of weighted predictions for the step k steps from now."""
        self.weight_total = torch.zeros(num_envs, policy.chunk_len)

    def act(self, obs: Observation) -> torch.Tensor:
        step = self.policy.sample(
            obs_to_device(obs, module_device(self.policy)),
            temperature=self.temperature,
            deterministic=self.deterministic,
        )
        chunk = step.actions.detach().float().cpu()
        self.weighted_sum += self.age_weights[None, :, None] * chunk
        self.weight_total += self.age_weights[None, :]
        actions = self.weighted_sum[:, 0] / self.weight_total[:, :1]
        # Shift the horizon by one step: the plans for the next step move to the front.
        self.weighted_sum = torch.roll(self.weighted_sum, -1, dims=1)
        self.weight_total = torch.roll(self.weight_total, -1, dims=1)
        self.weighted_sum[:, -1] = 0.0
        self.weight_total[:, -1] = 0.0
        return actions.clamp(-1.0, 1.0)

    def episodes_ended(self, done: torch.Tensor) -> None:
        """Forget the plans of worlds whose episode ended."""
        ended = done.cpu()
        self.weighted_sum[ended] = 0.0
        self.weight_total[ended] = 0.0


def make_executor(
    policy: ChunkPolicy,
    num_envs: int,
    execute_steps: int = 0,
    deterministic: bool = True,
    temperature: float = 1.0,
    ensemble_decay: float | None = None,
) -> Executor:
    """Temporal ensembling when ``ensemble_decay`` is set, else chunks executed ``execute_steps``
    actions at a time (``<= 0``: whole chunks; a state policy's chunk is one action)."""
    if ensemble_decay is None:
        return ChunkExecutor(policy, num_envs, execute_steps, deterministic, temperature)
    return TemporalEnsembleExecutor(policy, num_envs, ensemble_decay, deterministic, temperature)
