"""The off-policy learner's batch source when actors run elsewhere: transitions arrive in an inbox
(``remote_link``), go into the online replay (the taken-over ones into the intervention replay as
well), and minibatches are drawn as ``ReplaySource`` draws them (``demo_sampler``).

An update is made only for data: the first once ``learning_starts`` transitions have arrived plus
``env_steps_per_update * worlds`` more, then one each time that many more have arrived (several in a
row when they arrive together), so the update-to-data ratio is the local source's whatever the
actors' pace, and a learner whose actors have all stopped waits without updating.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from vla_rl.data.replay_buffer import ReplayBuffer, TransitionBatch
from vla_rl.training.off_policy.config import ReplayConfig
from vla_rl.training.off_policy.demo_sampler import DemoSampler
from vla_rl.training.off_policy.remote_link import LearnerLink, TransitionRows, TransitionSpec

POLL_S = 0.05
"""How often a waiting learner checks whether it should stop waiting."""


class RemoteSource:
    """Fills ``replay`` (and ``interventions``) from ``link``'s inbox and samples it (and the
    demonstration pool: ``demos`` and ``interventions``) for each update;
    publishes ``weights`` (``SACPolicy.acting``: the encoder and the actor) into ``link`` for the
    actors."""

    def __init__(
        self,
        spec: TransitionSpec,
        replay: ReplayBuffer,
        cfg: ReplayConfig,
        utd_ratio: int,
        seed: int,
        weights: torch.nn.Module,
        publish_interval_updates: int = 1,
        demos: ReplayBuffer | None = None,
        demo_share: float = 0.5,
        interventions: ReplayBuffer | None = None,
    ) -> None:
        if spec.worlds != replay.num_envs:
            raise ValueError(f"a step of {spec.worlds} worlds does not fit a replay of {replay.num_envs}")
        self.link = LearnerLink(spec)
        """What the learner server fills and reads."""
        self.replay, self.cfg, self.utd_ratio = replay, cfg, utd_ratio
        self.weights, self.publish_interval_updates = weights, publish_interval_updates
        self.sampler = DemoSampler(replay, cfg.batch_size, demos, interventions, demo_share)
        """Stores the transitions and draws the minibatches."""
        self.generator = torch.Generator().manual_seed(seed)
        """Draws the minibatches."""
        self.rows_per_update = cfg.env_steps_per_update * spec.worlds
        self.env_steps = 0
        """Transitions taken into the replay so far."""
        self.used_steps = cfg.learning_starts
        """Transitions the updates so far account for (the warm-up counts as used)."""
        self.actor_seqs: dict[str, int] = {}
        """Per actor, the number of its last message taken into the replay."""
        self.published_version: int | None = None
        self._batched_steps = 0

    # ----- the learner's side -----------------------------------------------------------------------------
    def publish(self, version: int) -> None:
        """Publish ``weights`` as ``version`` (the updates made) if ``publish_interval_updates`` have
        passed since the last publication (or none was made)."""
        last = self.published_version
        if last is None or version - last >= self.publish_interval_updates:
            self.link.weights.publish(version, self.weights)
            self.published_version = version

    def drain(self) -> int:
        """Take what arrived into the replay; returns the transitions taken."""
        taken = 0
        for entry in self.link.inbox.drain():
            self._add(entry.rows)
            self.actor_seqs[entry.actor_id] = entry.seq
            taken += len(entry.rows)
        self.env_steps += taken
        return taken

    def ready(self) -> bool:
        """Enough new transitions for the next update."""
        return self.env_steps - self.used_steps >= self.rows_per_update

    def wait_for_data(self, stop: Callable[[], bool]) -> bool:
        """Drain until :meth:`ready` (True) or until ``stop()`` says to give up (False)."""
        while True:
            self.drain()
            if self.ready():
                return True
            if stop():
                return False
            self.link.inbox.wait(POLL_S)

    def next_batch(self) -> tuple[list[TransitionBatch], dict[str, float]]:
        """``utd_ratio`` minibatches for the next update (waits for its data first)."""
        self.wait_for_data(lambda: False)
        self.used_steps += self.rows_per_update
        batches = [self.sampler.minibatch(self.generator) for _ in range(self.utd_ratio)]
        arrived, self._batched_steps = self.env_steps - self._batched_steps, self.env_steps
        return batches, {"rollout/env_steps": float(arrived), "remote/actors": float(len(self.actor_seqs))}

    def _add(self, rows: TransitionRows) -> None:
        """Rows go into the replays one batched step (``worlds`` rows) at a time."""
        worlds = self.replay.num_envs
        for start in range(0, len(rows), worlds):
            part = slice(start, start + worlds)

            def take(obs: dict[str, Any], part: slice = part) -> dict[str, torch.Tensor]:
                return {key: torch.from_numpy(value[part]) for key, value in obs.items()}

            self.sampler.add(
                take(rows.obs),
                torch.from_numpy(rows.action[part]),
                torch.from_numpy(rows.reward[part]),
                torch.from_numpy(rows.terminated[part]),
                torch.from_numpy(rows.truncated[part]),
                take(rows.next_obs),
                torch.from_numpy(rows.intervention[part]),
            )

    # ----- checkpoints ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The counters, the generator and the last message taken from each actor (the replays are
        saved beside it; what waits in the inbox is not saved)."""
        return {
            "source_env_steps": self.env_steps,
            "source_used_steps": self.used_steps,
            "source_generator": self.generator.get_state(),
            "source_actor_seqs": dict(self.actor_seqs),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "source_actor_seqs" not in state:
            raise ValueError("the checkpoint is of a source=local run; a remote learner cannot resume it")
        self.env_steps = self._batched_steps = int(state["source_env_steps"])
        self.used_steps = int(state["source_used_steps"])
        self.generator.set_state(state["source_generator"])
        self.actor_seqs = {str(actor): int(seq) for actor, seq in state["source_actor_seqs"].items()}
        self.link.inbox.restore(self.actor_seqs)
