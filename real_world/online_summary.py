"""What an online actor reports: each episode's counts (``EpisodeStats``) and the actor's summary
(``ActorSummary``), written as ``online_summary.json`` in the actor's output folder."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vla_rl.data.lerobot_layout import atomic_write_text


@dataclass
class EpisodeStats:
    index: int
    seed: int | None
    steps: int = 0
    """Control periods the actor commanded (held ones included)."""
    success: bool = False
    ended_by: str = ""
    """``success``, ``failure`` (a person's label), ``time_limit`` (the simulator's) or ``max_steps``."""
    intervention_steps: int = 0
    held_steps: int = 0
    """Periods the safety layer held the measured pose."""
    unsynced_steps: int = 0
    """Periods whose camera frames were not within the sync slop of the joint state (no action)."""
    learner_hold_steps: int = 0
    """Periods held because the learner was lost (``on_learner_lost: hold``)."""
    transitions: int = 0
    """Transitions handed to the learner client."""
    late_frame_transitions: int = 0
    """Transitions not sent because a camera the learner reads had no frame of their period (their
    observation, or their next one where it would be bootstrapped from)."""
    weights_version: int | None = None
    """Version of the weights at the episode's end."""
    watched: bool | None = None
    """Whether the intervention input could take over in this episode, where it decides that itself
    (the scripted expert's ``watch_probability``); None: not known (a person, or no input)."""
    sim_success: bool | None = None
    """Simulated robots: whether the simulator flagged success on any period judged (the ground truth
    beside a classifier's ``success``); None where no simulator reported."""


@dataclass
class ActorSummary:
    actor_id: str
    episodes: list[EpisodeStats] = field(default_factory=list)
    weights_versions: list[int] = field(default_factory=list)
    """Every weights version loaded, in order."""
    safety_counts: dict[str, int] = field(default_factory=dict)
    sent_rows: int = 0
    """Transitions the learner acknowledged."""
    dropped: int = 0
    pending: int = 0
    """Messages still queued at the end (the learner was gone)."""

    def summary(self) -> dict[str, Any]:
        episodes = self.episodes
        return {
            "actor_id": self.actor_id,
            "episodes": len(episodes),
            "success_rate": float(np.mean([e.success for e in episodes])) if episodes else None,
            "sim_success_rate": _rate([e.sim_success for e in episodes]),
            "intervention_steps": sum(e.intervention_steps for e in episodes),
            "steps": sum(e.steps for e in episodes),
            "weights_versions": self.weights_versions,
            "safety_counts": self.safety_counts,
            "sent_rows": self.sent_rows,
            "dropped": self.dropped,
            "pending": self.pending,
            "per_episode": [asdict(e) for e in episodes],
        }

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.summary(), indent=2))


def _rate(flags: list[bool | None]) -> float | None:
    """Share of True among the flags that are known; None when none is."""
    known = [flag for flag in flags if flag is not None]
    return float(np.mean(known)) if known else None
