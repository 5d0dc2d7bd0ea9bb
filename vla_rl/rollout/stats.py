"""What one collection measured (``RolloutStats``), how it is tallied, merged and logged."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import torch


@dataclass(kw_only=True)
class RolloutStats:
    """Summary of one collected rollout, of a state or a chunk policy. Episode means are NaN when no
    episode finished; the fields a collector does not measure are NaN or None (left out of the
    metrics)."""

    episodes: int
    """Episodes that finished during the rollout."""
    mean_return: float
    """Mean undiscounted return of the finished episodes."""
    mean_length: float = math.nan
    """Mean length (control steps) of the finished episodes."""
    success_rate: float
    """Fraction of finished episodes that ended in success."""
    success_once_rate: float = math.nan
    """Fraction of finished episodes successful at any step."""
    env_steps: int
    """Control steps collected over all worlds."""
    rollout_time_s: float
    """Wall time of the whole collection."""
    sim_time_s: float
    """Part of it spent in ``env.step``."""
    policy_time_s: float
    """Part of it spent in policy inference (acting, truncation bootstrap, last value)."""
    lost_steps: int | None = None
    """Transitions dropped because their env worker died before stepping them (state rollouts count
    them from 0; chunk rollouts count the decisions cut short, present once there is one)."""
    decisions: int | None = None
    """Policy calls per world (chunk rollouts: each executes part of an action chunk)."""

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / self.rollout_time_s if self.rollout_time_s > 0 else math.nan


@dataclass
class EpisodeTally:
    """Episodes finished during one collection, and where its time went."""

    returns: list[torch.Tensor] = field(default_factory=list)
    lengths: list[torch.Tensor] = field(default_factory=list)
    successes: list[torch.Tensor] = field(default_factory=list)
    successes_once: list[torch.Tensor] = field(default_factory=list)
    sim_time_s: float = 0.0
    policy_time_s: float = 0.0
    lost_steps: int | None = None
    """Transitions (chunk rollouts: decisions) lost with a dead env worker (state rollouts count them
    from 0)."""

    def add(self, episode: dict[str, torch.Tensor], done: torch.Tensor) -> None:
        ended = done.to(episode["return"].device)
        self.add_outcomes(episode["success"], episode["return"], ended)
        self.lengths.append(episode["length"][ended].float().cpu())
        self.successes_once.append(episode["success_once"][ended].float().cpu())

    def add_outcomes(self, success: torch.Tensor, returns: torch.Tensor, ended: torch.Tensor) -> None:
        """Success and return of the episodes that ``ended`` (all that a chunk rollout measures)."""
        self.returns.append(returns[ended].float().cpu())
        self.successes.append(success[ended].float().cpu())

    def stats(self, env_steps: int, rollout_time_s: float, decisions: int | None = None) -> RolloutStats:
        def mean(chunks: list[torch.Tensor]) -> float:
            values = torch.cat(chunks) if chunks else torch.empty(0)
            return float(values.mean()) if values.numel() else math.nan

        return RolloutStats(
            episodes=int(sum(chunk.numel() for chunk in self.returns)),
            mean_return=mean(self.returns),
            mean_length=mean(self.lengths),
            success_rate=mean(self.successes),
            success_once_rate=mean(self.successes_once),
            env_steps=env_steps,
            rollout_time_s=rollout_time_s,
            sim_time_s=self.sim_time_s,
            policy_time_s=self.policy_time_s,
            lost_steps=self.lost_steps,
            decisions=decisions,
        )


def merge_stats(parts: list[RolloutStats]) -> RolloutStats:
    """Statistics of several rollouts of one iteration as one."""
    episodes = sum(p.episodes for p in parts)

    def weighted(name: str) -> float:
        if episodes == 0:
            return math.nan
        return sum(getattr(p, name) * p.episodes for p in parts if p.episodes) / episodes

    return RolloutStats(
        episodes=episodes,
        success_rate=weighted("success_rate"),
        mean_return=weighted("mean_return"),
        env_steps=sum(p.env_steps for p in parts),
        decisions=sum(p.decisions or 0 for p in parts),
        rollout_time_s=sum(p.rollout_time_s for p in parts),
        policy_time_s=sum(p.policy_time_s for p in parts),
        sim_time_s=sum(p.sim_time_s for p in parts),
        lost_steps=None
        if all(p.lost_steps is None for p in parts)
        else sum(p.lost_steps or 0 for p in parts),
    )


def stats_metrics(stats: RolloutStats) -> dict[str, float]:
    """A rollout's statistics as ``perf/<name>_s`` and ``rollout/<name>`` scalars (NaN dropped)."""
    return {
        f"{'perf' if name.endswith('_s') else 'rollout'}/{name}": float(value)
        for name, value in dataclasses.asdict(stats).items()
        if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value))
    }
