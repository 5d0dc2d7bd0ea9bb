"""An algorithm whose update runs on data-parallel trainer ranks, driven from the training process.

``DataParallelAlgorithm`` has the algorithm interface the training loop calls (``update``,
``state_dict``, ``load_state_dict``; ``death_errors`` and ``restart`` for a dead rank). Each update
ships the batch (one object-store copy on Ray) to every ``DataParallelRank``, with the driver's
policy state when the ranks may not hold it (the first update of a group, and after a checkpoint's
state was loaded); every rank runs its algorithm's update (each on its share of every minibatch, the
gradients combined over the group) and reports the checksum of its weights. The checksums must
agree; rank 0's weights become the driver's policy, the next version, whose checksum is checked
again. The ranks keep the optimizer state; the driver reads it from rank 0 for checkpoints (every
rank takes part: a sharded rank gathers it) and sends a checkpoint's to all. A run whose rank died
(``death_errors``) calls ``restart`` (a new group) and loads its last checkpoint
(``TrainingLoop.restart_from_checkpoint``).

State PPO (``ppo_ranks``) and the chunk algorithms (``chunk_ranks``) subclass both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from vla_rl.distributed.process_group import GroupMember
from vla_rl.distributed.runtime import Resources, Runtime, WorkerHandle
from vla_rl.distributed.weights import cpu_state, state_checksum


class DataParallelRank(GroupMember):
    """One trainer rank: a replica of the driver's ``policy`` and the ``algorithm`` that trains it
    (both built by the subclass, the algorithm once the rank has joined the group)."""

    rank: int
    policy: torch.nn.Module
    algorithm: Any

    def receive(self, batch: Any) -> Any:
        """What the algorithm's ``update`` takes, from the batch the driver shipped."""
        return batch

    def update(
        self, batch: Any, policy_state: dict[str, torch.Tensor] | None
    ) -> tuple[dict[str, float], dict[str, torch.Tensor] | None, str]:
        """(metrics, the new policy state on rank 0 else None, the checksum of this rank's weights);
        ``policy_state``: the driver's weights to start from (None: this rank's, the last version)."""
        if policy_state is not None:
            self.load_policy_state(policy_state)
        metrics = self.algorithm.update(self.receive(batch))
        state = self.policy_state()
        return metrics, state if self.rank == 0 else None, state_checksum(state)

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The whole policy's weights on the CPU (a sharded rank gathers them: every rank calls it)."""
        return cpu_state(self.policy)

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        self.policy.load_state_dict(state)

    def state_dict(self) -> dict[str, Any] | None:
        """The algorithm's state on rank 0, None on the others (every rank is called: a sharded
        rank's state is gathered collectively)."""
        return self.algorithm.state_dict() if self.rank == 0 else None

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.algorithm.load_state_dict(state)


class DataParallelAlgorithm:
    """The algorithm interface with the update on ``world_size`` ranks ``rank_cls(*rank_args, rank,
    world_size)``; the driver's ``policy`` receives each new version."""

    def __init__(
        self,
        runtime: Runtime,
        policy: torch.nn.Module,
        rank_cls: type,
        rank_args: tuple[Any, ...],
        world_size: int,
        resources: Resources | Sequence[Resources] | None = None,
        rendezvous_host: str = "127.0.0.1",
    ) -> None:
        """``resources``: one for all ranks, or one per rank."""
        self.runtime, self.policy = runtime, policy
        self.rank_cls, self.rank_args = rank_cls, rank_args
        self.world_size, self.rendezvous_host = world_size, rendezvous_host
        self.resources = list(resources) if isinstance(resources, Sequence) else [resources] * world_size
        self.death_errors = runtime.worker_death_errors()
        """What ``update`` raises when a rank died; the trainer then calls ``restart``."""
        self.ranks: list[WorkerHandle] = []
        self.ranks_in_sync = False
        """Whether the ranks hold the driver's weights (the version they sent it last)."""
        self._start()
        self.version = 0
        """Updates applied to the driver's policy."""

    def _start(self) -> None:
        self.ranks_in_sync = False
        self.ranks = [
            self.runtime.spawn(self.rank_cls, *self.rank_args, r, self.world_size, resources=resources)
            for r, resources in enumerate(self.resources)
        ]
        address = self.ranks[0].call("rendezvous", self.rendezvous_host).result()
        self.runtime.gather([rank.call("join", address) for rank in self.ranks])

    def restart(self) -> None:
        """A new group of ranks (after one died); the caller loads the checkpoint to go on from."""
        self.close()
        self._start()

    def export(self, batch: Any) -> Any:
        """What is shipped to the ranks of ``batch`` (picklable)."""
        return batch

    def update(self, batch: Any) -> dict[str, float]:
        payload = self.runtime.share(self.export(batch))
        state = None if self.ranks_in_sync else self.runtime.share(cpu_state(self.policy))
        results = self.runtime.gather_group([rank.call("update", payload, state) for rank in self.ranks])
        checksums = [checksum for _, _, checksum in results]
        if len(set(checksums)) != 1:
            raise RuntimeError(
                f"trainer ranks hold different weights after an update: {[c[:12] for c in checksums]}"
            )
        metrics, new_state, _ = results[0]
        self.policy.load_state_dict(new_state)
        if state_checksum(cpu_state(self.policy)) != checksums[0]:
            raise RuntimeError("the driver's policy does not hold the trainer ranks' weights")
        self.version += 1
        self.ranks_in_sync = True
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return self.runtime.gather_group([rank.call("state_dict") for rank in self.ranks])[0]

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A checkpoint's optimizer state to every rank; the driver's weights (loaded with it) go with
        the next update."""
        self.runtime.gather([rank.call("load_state_dict", state) for rank in self.ranks])
        self.ranks_in_sync = False

    def close(self) -> None:
        self.runtime.stop_all(self.ranks, "leave", timeout_s=10.0)
        self.ranks = []
