"""One episode per world of a chunk policy, from given reset seeds (GRPO: the worlds of a group share
a seed and so an initial state).

Built on the collector's chunk steps (``RolloutCollector.sample``, ``execute``, ``record``), with its
options (``execute_steps``, rewards, shaping). Only the worlds still in their episode are asked for a
decision; a world whose episode ended holds still until every world has ended or ``max_decisions``
decisions were made, and its later entries are marked invalid (they do not train).
"""

from __future__ import annotations

import time

import torch

from vla_rl.envs.base import Observation
from vla_rl.envs.batching import select_worlds
from vla_rl.policies.chunk_policy import ChunkStep
from vla_rl.rollout.buffer import RolloutBuffer
from vla_rl.rollout.collector import RolloutCollector
from vla_rl.rollout.stats import EpisodeTally, RolloutStats


def collect_episodes(
    collector: RolloutCollector, world_seeds: list, max_decisions: int
) -> tuple[RolloutBuffer, torch.Tensor, torch.Tensor, RolloutStats]:
    """Reset the collector's env from ``world_seeds`` (one per world) and run one episode per world.
    Returns the batch, each world's success (bool [N]) and return ([N], summed until its episode
    ended), and the statistics."""
    start = time.perf_counter()
    collector.tally = EpisodeTally()
    obs, _ = collector.env.reset(seed=world_seeds)
    collector.potential.fill_(float("nan"))
    num_envs = collector.env.num_envs
    batch = RolloutBuffer(max_decisions, num_envs)
    active = torch.ones(num_envs, dtype=torch.bool)
    success = torch.zeros(num_envs, dtype=torch.bool)
    returns = torch.zeros(num_envs)
    decisions = 0
    while active.any() and decisions < max_decisions:
        step = sample_active(collector, obs, active)
        outcome = collector.execute(step.actions, active)
        collector.record(batch, obs, step, outcome, active)
        success |= outcome.success
        returns += outcome.step_rewards.sum(dim=1)
        batch.lost |= outcome.lost
        active &= ~outcome.ended
        obs = outcome.obs
        decisions += 1
    collector.tally.add_outcomes(success, returns, ~batch.lost)
    return batch, success, returns, collector.stats(decisions, start)


def sample_active(collector: RolloutCollector, obs: Observation, active: torch.Tensor) -> ChunkStep:
    """A decision for the ``active`` worlds only (bool [N]); the rows of the others are zeros."""
    rows = torch.nonzero(active).squeeze(1)
    step = collector.sample(select_worlds(obs, rows))

    def scatter(tensor: torch.Tensor) -> torch.Tensor:
        full = torch.zeros((len(active), *tensor.shape[1:]), dtype=tensor.dtype)
        full[rows] = tensor.detach().cpu()
        return full

    return ChunkStep(
        actions=scatter(step.actions),
        log_prob=scatter(step.log_prob),
        value=None if step.value is None else scatter(step.value),
        sample_info={key: scatter(value) for key, value in step.sample_info.items()},
    )
