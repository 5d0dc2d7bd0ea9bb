"""RLPD's symmetric minibatch, shared by the local and the remote batch sources.

Every transition goes into the online replay; one that a person or an expert chose (``intervention``
set) also goes into the **intervention replay**, so takeovers count as demonstrations. Each
minibatch draws ``round(share * batch_size)`` rows from the **demonstration pool** (the dataset's
demonstrations and the intervention transitions together) and the rest from the online replay. The
pool's rows are drawn uniformly over its union, with replacement: each row is a demonstration with
probability ``D / (D + I)`` (``D`` demonstration and ``I`` intervention transitions held), so a
demonstration and an intervention transition are equally likely. While the pool is empty (no
``demos.path`` and no takeover yet) every row is online.

The draws use the source's generator in a fixed order: the online rows first, then the pool's.
Without intervention transitions the pool's rows are ``demos.sample``'s, so a run without takeovers
draws exactly what it drew before takeovers were pooled; with them, one uniform index into the union
per row (so the pool may hold fewer transitions than a minibatch takes from it: a single takeover
already fills the whole share).
"""

from __future__ import annotations

import torch

from vla_rl.data.replay_buffer import ReplayBuffer, TransitionBatch
from vla_rl.envs.base import Observation


def intervention_replay(capacity: int, device: str | torch.device, obs_keys: list[str]) -> ReplayBuffer:
    """An empty intervention replay of ``capacity`` transitions. Its transitions arrive one at a
    time, from any world, so it keeps two frames per transition (sharing only saves writes)."""
    return ReplayBuffer(capacity, 1, device=device, frame_capacity=2 * capacity + 2, obs_keys=obs_keys)


def concatenate(*parts: TransitionBatch) -> TransitionBatch:
    """The rows of ``parts`` in order (same observation keys)."""
    first = parts[0]
    for part in parts[1:]:
        if part.obs.keys() != first.obs.keys():
            raise ValueError(f"observation keys differ: {sorted(first.obs)} vs {sorted(part.obs)}")

    def cat(field: str) -> torch.Tensor:
        return torch.cat([getattr(part, field) for part in parts])

    def cat_obs(field: str) -> dict[str, torch.Tensor]:
        return {key: torch.cat([getattr(part, field)[key] for part in parts]) for key in first.obs}

    return TransitionBatch(
        obs=cat_obs("obs"),
        action=cat("action"),
        reward=cat("reward"),
        next_obs=cat_obs("next_obs"),
        terminated=cat("terminated"),
        truncated=cat("truncated"),
        intervention=cat("intervention"),
    )


class DemoSampler:
    """Stores transitions into ``replay`` (and the flagged ones into ``interventions``) and draws
    minibatches of ``batch_size`` rows, ``share`` of them from ``demos`` and ``interventions``."""

    def __init__(
        self,
        replay: ReplayBuffer,
        batch_size: int,
        demos: ReplayBuffer | None = None,
        interventions: ReplayBuffer | None = None,
        share: float = 0.5,
    ) -> None:
        if interventions is not None and interventions.num_envs != 1:
            raise ValueError(
                f"the intervention replay takes one transition at a time, not {interventions.num_envs}"
            )
        self.replay, self.batch_size, self.share = replay, batch_size, share
        self.demos = demos
        """The demonstrations (``demos.path``), or None."""
        self.interventions = interventions
        """The intervention transitions received (``demos.interventions_as_demos``), or None."""

    def add(
        self,
        obs: Observation,
        action: torch.Tensor,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        next_obs: Observation,
        intervention: torch.Tensor | None = None,
    ) -> None:
        """One batched step into the online replay (``ReplayBuffer.add``'s fields); each world whose
        ``intervention`` is set also into the intervention replay."""
        self.replay.add(obs, action, reward, terminated, truncated, next_obs, intervention)
        if self.interventions is None or intervention is None:
            return
        for world in torch.as_tensor(intervention).nonzero().flatten().tolist():
            row = slice(world, world + 1)

            def take(o: Observation, row: slice = row) -> Observation:
                return {key: value[row] for key, value in o.items() if isinstance(value, torch.Tensor)}

            self.interventions.add(
                take(obs),
                action[row],
                reward[row],
                terminated[row],
                truncated[row],
                take(next_obs),
                torch.ones(1, dtype=torch.bool),
            )

    def pool_sizes(self) -> tuple[int, int]:
        """(demonstration, intervention) transitions the demonstration pool holds."""
        demos = len(self.demos) if self.demos is not None else 0
        interventions = len(self.interventions) if self.interventions is not None else 0
        return demos, interventions

    def demo_rows(self) -> int:
        """Rows of the next minibatch drawn from the pool: ``share`` of it, or none while it is empty."""
        return round(self.share * self.batch_size) if sum(self.pool_sizes()) > 0 else 0

    def minibatch(self, generator: torch.Generator) -> TransitionBatch:
        """``batch_size`` rows: the pool's first, then the online ones (draw order: module doc)."""
        pool_rows = self.demo_rows()
        online = self.replay.sample(self.batch_size - pool_rows, generator)
        if pool_rows == 0:
            return online
        if self.pool_sizes()[1] == 0:  # demonstrations only: drawn as before takeovers were pooled
            assert self.demos is not None
            return concatenate(self.demos.sample(pool_rows, generator), online)
        return concatenate(self._pool_sample(pool_rows, generator), online)

    def _pool_sample(self, rows: int, generator: torch.Generator) -> TransitionBatch:
        """``rows`` transitions drawn uniformly, with replacement, over the whole transitions of the
        demonstrations and the interventions together (the demonstrations' rows first)."""
        held = [(b, b.valid_slots()) for b in (self.demos, self.interventions) if b is not None]
        picks = torch.randint(sum(len(slots) for _, slots in held), (rows,), generator=generator)
        parts, start = [], 0
        for buffer, slots in held:
            mine = picks[(picks >= start) & (picks < start + len(slots))] - start
            if len(mine):
                parts.append(buffer.gather(slots[mine.to(slots.device)]))
            start += len(slots)
        return concatenate(*parts)
