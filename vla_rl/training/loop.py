"""The one training loop: batch -> ``algorithm.update(batch)`` -> log -> checkpoint -> evaluate.

Every way of learning runs through :meth:`TrainingLoop.train`: state PPO (``runner.Trainer``), chunk
RL (``chunk_rl.trainer.ChunkRLTrainer``: PPO, GRPO, Flow-SDE/Flow-Noise) and SFT
(``sft.trainer.SFTTrainer``) are subclasses that build the env, the policy, the algorithm and a
batch source (``vla_rl.training.sources``), and say what their budget counts and when they
evaluate. Written once here: the budget (updates or env steps, and the ``max_minutes`` cap of
``budget.py``), stop signals, checkpoints at an interval, at the end and on a stop, exact resume
(counters, every RNG, the algorithm's and the source's state), logging and the evaluation hooks.

A checkpoint (``<run_dir>/checkpoints/iter_XXXXXX``) holds the trainer state
(``iteration``, ``elapsed_s``, ``algorithm``, ``rng``, ``wandb_run_id`` and what the subclass adds:
env state, sampler, curriculum, evaluations) and the policy, as ``policy.safetensors`` or as its
``save_pretrained`` folder ``policy/``.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from vla_rl.training.budget import WallClock, now_s
from vla_rl.training.checkpoint import (
    POLICY_DIRNAME,
    Checkpoint,
    checkpoint_name,
    find_resume_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from vla_rl.training.loggers import MultiLogger, build_logger
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.run_record import record_run_start
from vla_rl.training.seeding import rng_state, seed_everything, set_rng_state
from vla_rl.training.stop_signals import install_stop_handlers


@dataclass(kw_only=True)
class Run:
    """What one ``train`` call has done so far (``TrainingLoop.run``); ``RunResult`` adds the totals."""

    stop_reason: str
    """The budget's config key when it was spent (``iterations``, ``steps``, ``total_env_steps``), the
    ``max_minutes`` stop (``time`` or ``max_minutes``) or ``interrupted``."""
    first_iteration: int
    """The iteration the call started from (after a resume, the checkpoint's)."""
    history: list[dict[str, float]] = field(default_factory=list)
    """Metrics of every update of this call, in order."""
    events: list[str] = field(default_factory=list)
    """What happened to the workers during this call (a dead env worker replaced, trainer ranks
    restarted from a checkpoint)."""
    started_s: float = field(default_factory=now_s)
    """When the ``train`` call began (``budget.now_s``)."""


@dataclass(kw_only=True)
class RunResult(Run):
    """What a ``train`` call returns: its ``Run`` and the totals; a way of learning adds its own
    fields (``TrainingLoop.result``)."""

    iterations: int
    """Updates completed in total (including those before a resume)."""
    wall_time_s: float
    """Wall time of this ``train`` call (chunk RL: of the whole run, across resumes)."""
    last_checkpoint: Path | None
    """The checkpoint written last."""


class TrainingLoop:
    """The loop and everything around it. A subclass's ``__init__`` calls :meth:`begin`, builds
    ``policy``, ``algorithm`` and ``source`` (``next_batch() -> (batch, metrics)``,
    ``state_dict()``, ``load_state_dict(state)``), then :meth:`resume` with the checkpoint it
    found (:meth:`_find_resume_checkpoint`)."""

    budget_reason = "iterations"
    """The config key of the budget (``budget_total``), and the ``stop_reason`` when it is spent;
    ``time_reason`` when ``max_minutes`` stops the run."""
    time_reason = "time"
    log_unit = "iteration"
    """What the console bar counts (``log_step`` of them, up to ``budget_total``)."""
    saves_pretrained = True
    """The policy goes to the checkpoint as its ``save_pretrained`` folder (False: ``policy.safetensors``)."""
    result_type: type[RunResult] = RunResult
    """What ``train`` returns: ``RunResult`` and the fields the subclass adds (see ``result``)."""

    def begin(self, cfg: Any) -> None:
        self._built_from = now_s()
        """When building began: building the env and the policy counts against ``max_minutes``."""
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        torch.set_num_threads(cfg.torch_num_threads)
        seed_everything(cfg.seed)
        self.iteration = 0
        """Updates done (including those before a resume)."""
        self.elapsed_s = 0.0
        """Wall-clock seconds the run has taken so far, across resumes (only ``max_minutes`` reads it)."""
        self.wandb_run_id: str | None = None
        self.last_checkpoint: Path | None = None
        self.clock: WallClock | None = None
        self._save_s = 0.0
        """The longest checkpoint write so far (kept in reserve under ``max_minutes``)."""
        self._stop_requested = False
        self.run = Run(stop_reason=self.budget_reason, first_iteration=0)
        """The current (or last) ``train`` call's record."""
        self.log = logging.getLogger(type(self).__module__)
        """The run's messages go out under the trainer's module."""
        self.env: Any = None
        """The training env, where the way of learning has one (closed by ``close``)."""
        self.runtime: Any = None
        """Where env workers and trainer ranks run (``None``: all in this process)."""
        self._env_events_seen = 0
        """How many of the env workers' events (``env_events``) the run has recorded."""

    # ----- the loop ---------------------------------------------------------------------------------------

    @logs_to_run_dir
    def train(self) -> Any:
        record_run_start(self.run_dir, self.cfg)
        self.logger = self._build_logger()
        built_s = now_s() - self._built_from  # a resumed run continues its clock
        self.clock = clock = WallClock(getattr(self.cfg, "max_minutes", 0.0), self.elapsed_s + built_s)
        self.run = run = Run(stop_reason=self.budget_reason, first_iteration=self.iteration)
        restore_signals = install_stop_handlers(self.request_stop, lambda: self._stop_requested)
        self.log.info("%s", self.plan())
        try:
            self.before_training()
            while not self.budget_spent():
                if reason := self.stop_reason(run):
                    run.stop_reason = reason
                    break
                started = now_s()
                try:
                    metrics = self.run_iteration()  # next_batch -> algorithm.update(batch)
                except self.recoverable_errors() as error:
                    self.restart_from_checkpoint(error, run)
                    continue
                clock.record_update(now_s() - started)
                run.history.append(metrics)
                if self.iteration == run.first_iteration + 1:
                    self.log.info("%s", self.estimate(run.history))
                if self.iteration % self.cfg.logger.log_interval == 0:
                    self.logger.log(metrics, self.log_step())
                last = self.budget_spent() or not clock.room_for_update()
                self.after_update(last, run)
                if self.iteration % self.cfg.checkpoint_interval == 0 and not last:
                    self.save()
            self.finish(run)
        finally:
            restore_signals()
            if self.iteration > 0 and self.unsaved():
                self.save()
            self.logger.close()
        return self.result(run)

    def stop_reason(self, run: Run) -> str | None:
        """Why the run stops before another update: a stop request, or no room under ``max_minutes``
        for one more update and what follows it (the final evaluation and checkpoint)."""
        if self._stop_requested:
            return "interrupted"
        clock = self.clock
        assert clock is not None, "stop_reason runs inside train"
        clock.reserve_s = self.final_evaluation_s(run.history) + self._save_s
        if clock.room_for_update():
            return None
        self.log.info(
            "stopping after %d updates: another update and the final evaluation (about %.0f s) would pass "
            "max_minutes=%g",
            self.iteration,
            clock.reserve_s,
            clock.max_minutes,
        )
        return self.time_reason

    def run_iteration(self) -> dict[str, float]:
        """One update: the source's batch, the algorithm's update; returns the iteration's metrics."""
        started = time.perf_counter()
        batch, metrics = self.next_batch()
        self._record_env_events()
        batched = time.perf_counter()
        losses = self.algorithm.update(batch)
        self.iteration += 1
        metrics.update({k if "/" in k else f"train/{k}": float(v) for k, v in losses.items()})
        return self.advance(metrics, batched - started, time.perf_counter() - batched)

    def next_batch(self) -> tuple[Any, dict[str, float]]:
        return self.source.next_batch()

    def _record_env_events(self) -> None:
        """Add what happened to the env workers during the batch (a worker replaced) to the run's
        events, and log it."""
        events = env_events(self.env)
        for event in events[self._env_events_seen :]:
            self.run.events.append(f"iteration {self.iteration + 1}: {event}")
            self.log.warning(self.run.events[-1])
        self._env_events_seen = len(events)

    # ----- what a way of learning says (defaults: none) ----------------------------------------------------

    def budget_spent(self) -> bool:
        return self.log_step() >= self.budget_total()

    def budget_total(self) -> int:
        """The budget, in the units ``log_step`` counts: the config's ``budget_reason`` key."""
        return getattr(self.cfg, self.budget_reason)

    def log_step(self) -> int:
        """The x-axis of the logged metrics and what the budget counts."""
        return self.iteration

    def advance(self, metrics: dict[str, float], batch_s: float, update_s: float) -> dict[str, float]:
        """Count the update just made in the subclass's own units and add its metrics (``batch_s``:
        the source's time, ``update_s``: ``algorithm.update``'s)."""
        return metrics

    def updates_left(self) -> int:
        return self.budget_total() - self.iteration

    def plan(self) -> str:
        """One line: what the run will do."""
        return f"plan: {self.updates_left()} updates"

    def estimate(self, history: list[dict[str, float]]) -> str:
        """After the first update: about how long the run will take at the measured pace."""
        clock, left = self.clock, self.updates_left()
        assert clock is not None, "estimate runs inside train"
        seconds = (
            clock.elapsed_s
            + left * clock.longest_update_s
            + self.interval_evaluations_s(left)
            + self.final_evaluation_s(history)
        )
        capped = f", capped at {clock.max_minutes:g} min" if clock.capped else ""
        return (
            f"first update took {clock.longest_update_s:.1f} s: about {seconds / 60:.1f} min for "
            f"{left} more updates and the evaluations{capped}"
        )

    def interval_evaluations_s(self, updates: int) -> float:
        """Seconds the evaluations during the next ``updates`` updates will take."""
        return 0.0

    def final_evaluation_s(self, history: list[dict[str, float]]) -> float:
        """Seconds kept under ``max_minutes`` for the final evaluation."""
        return 0.0

    def before_training(self) -> None:
        """Before the first update of a ``train`` call (an evaluation of the starting point)."""

    def after_update(self, last: bool, run: Run) -> None:
        """After each update (``last``: no update follows): periodic evaluations."""

    def finish(self, run: Run) -> None:
        """After the last update: the final evaluation and checkpoint (the loop saves an unsaved one)."""

    def extra_state(self) -> dict[str, Any]:
        """Trainer state beyond the loop's: the source's (env, sampler, curriculum) and the subclass's."""
        return self.source.state_dict()

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.source.load_state_dict(state)

    def upgrade_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint's trainer state in today's layout (older releases wrote other keys)."""
        return state

    def result(self, run: Run) -> Any:
        """The ``train`` call's ``result_type``: the loop's fields, and each field it adds to
        ``RunResult``'s copied from the trainer's attribute of that name (``env_steps``, ``evaluations``)."""
        added = fields(self.result_type)[len(fields(RunResult)) :]  # a dataclass lists its base's first
        return self.result_type(
            **{f.name: getattr(run, f.name) for f in fields(Run)},
            iterations=self.iteration,
            wall_time_s=self.wall_time_s(run),
            last_checkpoint=self.last_checkpoint,
            **{f.name: copy.copy(getattr(self, f.name)) for f in added},
        )

    def wall_time_s(self, run: Run) -> float:
        """The result's ``wall_time_s``: this ``train`` call's."""
        return now_s() - run.started_s

    def close(self) -> None:
        """Release the algorithm's and the source's workers, the env and the runtime."""
        for part in (self.algorithm, getattr(self, "source", None)):
            if hasattr(part, "close"):
                part.close()
        if self.env is not None:
            self.env.close()
        if self.runtime is not None:
            self.runtime.shutdown()

    # ----- stop, checkpoints, resume ----------------------------------------------------------------------

    def request_stop(self) -> None:
        """Finish the current update, write a checkpoint and return from ``train``."""
        self._stop_requested = True

    def _find_resume_checkpoint(self) -> Checkpoint | None:
        return find_resume_checkpoint(self.cfg.resume, self.run_dir)

    def state_dict(self) -> dict[str, Any]:
        """Everything that changes during training except the policy weights."""
        if self.clock is not None:
            self.elapsed_s = self.clock.elapsed_s
        return {
            "iteration": self.iteration,
            "elapsed_s": self.elapsed_s,
            **self.extra_state(),
            "algorithm": self.algorithm.state_dict(),
            "rng": rng_state(),
            "wandb_run_id": self.wandb_run_id,
        }

    def save(self) -> Path:
        started = now_s()
        self.last_checkpoint = save_checkpoint(
            self.run_dir,
            self.iteration,
            None if self.saves_pretrained else self.policy.state_dict(),
            self.state_dict(),
            self.cfg,
            keep=self.cfg.keep_checkpoints,
            write_extra=self.write_checkpoint_files,
        )
        self._save_s = max(self._save_s, now_s() - started)
        return self.last_checkpoint

    def write_checkpoint_files(self, directory: Path) -> None:
        """Files written into a checkpoint folder before it is moved into place: the policy's
        ``save_pretrained`` folder where ``saves_pretrained`` (a learner adds its replay buffer)."""
        if self.saves_pretrained:
            self.policy.save_pretrained(directory / POLICY_DIRNAME)

    def unsaved(self) -> bool:
        return self.last_checkpoint is None or self.last_checkpoint.name != checkpoint_name(self.iteration)

    def resume(self, checkpoint: Checkpoint | None) -> None:
        """Continue from ``checkpoint`` exactly where it was written (None: a fresh start)."""
        if checkpoint is None:
            return
        state = self.upgrade_state(checkpoint.trainer_state)
        if checkpoint.policy_state:
            self.policy.load_state_dict(checkpoint.policy_state)
        self.algorithm.load_state_dict(state["algorithm"])
        self.iteration = int(state["iteration"])
        self.elapsed_s = float(state.get("elapsed_s", 0.0))
        self.wandb_run_id = state.get("wandb_run_id")
        self.load_extra_state(state)
        set_rng_state(state["rng"])
        self.last_checkpoint = checkpoint.path
        self.log.info("resumed from %s (iteration %d)", checkpoint.path, self.iteration)

    def recoverable_errors(self) -> tuple[type[BaseException], ...]:
        """Errors of an update that the run survives by going back to its last checkpoint (an
        algorithm whose trainer ranks can die names them in ``death_errors`` and has ``restart``)."""
        return getattr(self.algorithm, "death_errors", ())

    def restart_from_checkpoint(self, error: BaseException, run: Run) -> None:
        """An update failed (a trainer rank died): restart the algorithm and go back to the last
        checkpoint (policy, optimizer, env state, RNGs), so the run goes on as if the lost updates
        had not happened."""
        if self.last_checkpoint is None:
            raise RuntimeError("a trainer rank died before the first checkpoint was written") from error
        failed = self.iteration + 1
        self.algorithm.restart()
        self.resume(load_checkpoint(self.last_checkpoint))
        del run.history[self.iteration - run.first_iteration :]
        run.events.append(
            f"iteration {failed}: a trainer rank died ({type(error).__name__}); new trainer ranks "
            f"restarted from checkpoint {self.last_checkpoint.name} (iteration {self.iteration})"
        )
        self.log.warning(run.events[-1])

    def _build_logger(self) -> MultiLogger:
        logger = build_logger(
            self.cfg.logger,
            self.run_dir,
            self.budget_total(),
            OmegaConf.to_container(OmegaConf.structured(self.cfg)),
            initial_env_steps=self.log_step(),
            wandb_resume_id=self.wandb_run_id,
            unit=self.log_unit,
        )
        self.wandb_run_id = logger.wandb_run_id or self.wandb_run_id
        return logger


def env_events(env: Any) -> list[str]:
    """The env workers' event log of ``env`` (looking through wrappers); empty for a local env."""
    while env is not None:
        if hasattr(env, "events"):
            return env.events
        env = getattr(env, "env", None)
    return []
