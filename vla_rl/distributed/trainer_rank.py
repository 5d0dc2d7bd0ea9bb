"""One rank of a trainer group: a model wrapped for data parallelism, trained on its batch shards.

A ``TrainTask`` says what is trained: the model (whose ``forward(batch)`` returns the loss, so the
DDP and FSDP2 wrappers see every use of the parameters), the optimizer, and the global batch of
each step (the same on every rank; each rank takes its contiguous share). Ranks checkpoint the
full model and optimizer state through ``vla_rl.training.checkpoint`` (atomic, rank 0 writes) and
restore the latest checkpoint when a group starts, which is how a group restarted after a dead
rank carries on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from vla_rl.distributed.process_group import (
    WRAPPERS,
    GroupMember,
    RendezvousAddress,
    full_state,
    init_trainer_rank,
    load_full_state,
    mean_over_ranks,
    shard_batch,
)
from vla_rl.training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint


class TrainTask(ABC):
    """What a trainer group trains. Instances are shipped to every rank (picklable)."""

    @abstractmethod
    def build_model(self) -> torch.nn.Module:
        """A fresh model (same initial weights on every rank); ``forward(batch)`` is the mean loss."""

    @abstractmethod
    def build_optimizer(self, parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer: ...

    @abstractmethod
    def batch(self, step: int) -> dict[str, torch.Tensor]:
        """The global batch of ``step`` (a pure function of it, so a restarted group replays it)."""


@dataclass
class RankSpec:
    """What each rank of a group is told."""

    world_size: int
    strategy: str
    """``none`` (one rank), ``ddp`` or ``fsdp2`` (``process_group.WRAPPERS``)."""
    run_dir: str
    """Where the group's checkpoints go (``<run_dir>/checkpoints``)."""
    keep_checkpoints: int = 2


class TrainerRank(GroupMember):
    def __init__(self, task: TrainTask, rank: int, spec: RankSpec) -> None:
        self.task, self.rank, self.spec = task, rank, spec
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None

    def join(self, address: RendezvousAddress) -> None:
        """Join the group (blocks until every rank has) and build the wrapped model and optimizer."""
        init_trainer_rank(address, self.rank, self.spec.world_size)
        self.model = WRAPPERS[self.spec.strategy](self.task.build_model())
        self.optimizer = self.task.build_optimizer(self.model.parameters())

    def restore(self) -> int:
        """Load the latest checkpoint if there is one; returns the step it was written at (or 0)."""
        directory = latest_checkpoint(Path(self.spec.run_dir) / "checkpoints")
        if directory is None:
            return 0
        checkpoint = load_checkpoint(directory)
        load_full_state(
            self.model, self.optimizer, checkpoint.policy_state, checkpoint.trainer_state["optimizer"]
        )
        return checkpoint.iteration

    def train_steps(self, first_step: int, count: int) -> list[float]:
        """Steps ``first_step .. first_step + count - 1``; returns each step's global mean loss."""
        losses = []
        for step in range(first_step, first_step + count):
            batch = shard_batch(self.task.batch(step), self.rank, self.spec.world_size)
            loss = self.model(batch)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            losses.append(mean_over_ranks(loss))
        return losses

    def save(self, step: int) -> None:
        """Checkpoint after ``step`` steps (a collective: every rank calls it; rank 0 writes)."""
        model_state, optimizer_state = full_state(self.model, self.optimizer)
        if self.rank == 0:
            save_checkpoint(
                self.spec.run_dir,
                step,
                model_state,
                {"optimizer": optimizer_state},
                self.spec,
                keep=self.spec.keep_checkpoints,
            )
        if dist.is_initialized():
            dist.barrier()  # nobody runs ahead of a checkpoint that is not on disk yet
