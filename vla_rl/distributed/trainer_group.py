"""A group of trainer ranks driven from one process, restarted from its checkpoint if a rank dies.

``TrainerGroup.train(total_steps)`` starts ``world_size`` ``TrainerRank`` workers (rank 0 publishes
the rendezvous address, all join, all restore the latest checkpoint), runs the steps in blocks that
end on a checkpoint, and collects each step's global loss. If any rank dies, the driver learns it
from that rank's call (the runtime's gather fails fast), stops the others (they would wait in a
collective for the dead one), records an event, starts a new group, which restores the last
checkpoint, and goes on from there: at most ``checkpoint_interval`` steps are redone. Several ranks
need a runtime whose workers run concurrently (Ray); the in-process runtime runs one rank.

Each ``TrainerRank`` holds a model wrapped for data parallelism and trains it on its batch shards.
A ``TrainTask`` says what is trained: the model (whose ``forward(batch)`` returns the loss, so the
DDP and FSDP2 wrappers see every use of the parameters), the optimizer, and the global batch of
each step (the same on every rank; each rank takes its contiguous share). Ranks checkpoint the
full model and optimizer state through ``vla_rl.training.checkpoint`` (atomic, rank 0 writes) and
restore the latest checkpoint when a group starts, which is how a group restarted after a dead
rank carries on.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
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
from vla_rl.distributed.runtime import Resources, Runtime, WorkerHandle
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


@dataclass
class TrainerGroupConfig:
    world_size: int = 1
    """Trainer ranks (processes); each takes 1/world_size of every global batch."""
    strategy: str = "ddp"
    """``none`` (one rank), ``ddp`` (gradients averaged) or ``fsdp2`` (parameters sharded)."""
    checkpoint_interval: int = 10
    """Steps between checkpoints: what a dead rank can cost."""
    max_restarts: int = 3
    """Give up after this many restarts of the group."""
    run_dir: str = "runs/trainer_group"
    rendezvous_host: str = "127.0.0.1"
    """Address rank 0 publishes: loopback on one machine; ``auto`` (rank 0's node address, from
    Ray) on a cluster."""
    death_check_timeout_s: float = 10.0
    """After a failed call, how long to wait on each rank to learn whether one died."""


@dataclass
class TrainerGroupResult:
    losses: list[float]
    """Global mean loss of every step, in order (a redone step keeps its last value)."""
    events: list[str] = field(default_factory=list)
    """Deaths and restarts, in order."""
    restarts: int = 0


class TrainerGroup:
    def __init__(
        self,
        runtime: Runtime,
        task: TrainTask,
        cfg: TrainerGroupConfig,
        resources: Resources | None = None,
        rank_cls: type = TrainerRank,
    ) -> None:
        if cfg.strategy not in WRAPPERS:
            raise ValueError(f"config key 'strategy': unknown {cfg.strategy!r}; known: {sorted(WRAPPERS)}")
        if cfg.world_size < 1 or cfg.checkpoint_interval < 1:
            raise ValueError("world_size and checkpoint_interval must be >= 1")
        self.runtime, self.task, self.cfg = runtime, task, cfg
        self.resources, self.rank_cls = resources, rank_cls
        self.spec = RankSpec(cfg.world_size, cfg.strategy, cfg.run_dir)
        self.ranks: list[WorkerHandle] = []

    def _start(self) -> int:
        """A new group of ranks, joined and restored; returns the step they continue from."""
        self.ranks = [
            self.runtime.spawn(self.rank_cls, self.task, rank, self.spec, resources=self.resources)
            for rank in range(self.cfg.world_size)
        ]
        address = self.ranks[0].call("rendezvous", self.cfg.rendezvous_host).result()
        self.runtime.gather([rank.call("join", address) for rank in self.ranks])
        return self.runtime.gather([rank.call("restore") for rank in self.ranks])[0]

    def _stop(self) -> None:
        self.runtime.stop_all(self.ranks)  # dead, or stuck in a collective with a dead rank
        self.ranks = []

    def _call_all(self, method: str, *args: object) -> list:
        """Every rank's result of ``method`` (a dead rank's death error first: ``gather_group``)."""
        futures = [rank.call(method, *args) for rank in self.ranks]
        return self.runtime.gather_group(futures, self.cfg.death_check_timeout_s)

    def train(self, total_steps: int) -> TrainerGroupResult:
        losses: list[float] = [float("nan")] * total_steps
        result = TrainerGroupResult(losses)
        death_errors = self.runtime.worker_death_errors()
        step = self._start()
        try:
            while step < total_steps:
                interval = self.cfg.checkpoint_interval
                count = min(interval - step % interval, total_steps - step)
                try:
                    per_rank = self._call_all("train_steps", step, count)
                    self._call_all("save", step + count)
                except death_errors as error:
                    result.restarts += 1
                    self._stop()
                    if result.restarts > self.cfg.max_restarts:
                        raise RuntimeError(
                            f"trainer group gave up after {self.cfg.max_restarts} restarts"
                        ) from error
                    failed, step = step, self._start()
                    result.events.append(
                        f"a trainer rank died ({type(error).__name__}) during steps "
                        f"{failed}..{failed + count - 1}; "
                        f"the group restarted from the checkpoint of step {step}"
                    )
                    continue
                losses[step : step + count] = per_rank[0]
                step += count
            with contextlib.suppress(Exception):
                self.runtime.gather([r.call("leave") for r in self.ranks])
        finally:
            self._stop()
        return result
