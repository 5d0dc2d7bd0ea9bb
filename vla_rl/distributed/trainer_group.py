"""A group of trainer ranks driven from one process, restarted from its checkpoint if a rank dies.

``TrainerGroup.train(total_steps)`` starts ``world_size`` ``TrainerRank`` workers (rank 0 publishes
the rendezvous address, all join, all restore the latest checkpoint), runs the steps in blocks that
end on a checkpoint, and collects each step's global loss. If any rank dies, the driver learns it
from that rank's call (the runtime's gather fails fast), stops the others (they would wait in a
collective for the dead one), records an event, starts a new group, which restores the last
checkpoint, and goes on from there: at most ``checkpoint_interval`` steps are redone. Several ranks
need a runtime whose workers run concurrently (Ray); the in-process runtime runs one rank.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from vla_rl.distributed.process_group import WRAPPERS
from vla_rl.distributed.runtime import Resources, Runtime, WorkerHandle
from vla_rl.distributed.trainer_rank import RankSpec, TrainerRank, TrainTask


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
