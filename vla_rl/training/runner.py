"""The training loop: collect -> update -> log -> checkpoint, until a step or time budget is spent.

The runner owns the loop, the metrics and the checkpoints; the environment, policy, rollout
collector and algorithm are built from the config by their own factories. A checkpoint holds
everything that changes during training (policy, optimizer, learning rate, counters, all global
RNG states and, when the backend can snapshot, the simulator state), so a resumed run produces
the same numbers as one that never stopped.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from vla_rl.config.schema import TrainConfig
from vla_rl.distributed.layout import make_training_runtime
from vla_rl.distributed.remote_env import build_training_env
from vla_rl.envs.base import BatchedEnv
from vla_rl.rewards.env_wrapper import wrap_with_reward_model
from vla_rl.training.budget import WallClock, describe_cap
from vla_rl.training.checkpoint import (
    Checkpoint,
    find_resume_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from vla_rl.training.components import build_training_components
from vla_rl.training.evaluate import EvalResult, evaluate
from vla_rl.training.loggers import MultiLogger, build_logger
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.run_record import record_run_start
from vla_rl.training.seeding import rng_state, seed_everything, set_rng_state
from vla_rl.training.stop_signals import install_stop_handlers

log = logging.getLogger(__name__)

EVALUATION_PACE_FACTOR = 2.0
"""The final evaluation is budgeted at this many times the training rollouts' time per batched env
step (a fresh env, deterministic actions, bookkeeping per episode) ..."""
EVALUATION_FIXED_S = 10.0
"""... plus this many seconds (building its env, recording and writing its video)."""


@dataclass
class TrainResult:
    iterations: int
    """Iterations completed in total (including those before a resume)."""
    env_steps: int
    """Environment steps collected in total."""
    wall_time_s: float
    """Wall time of this ``train`` call."""
    stop_reason: str
    """``total_env_steps``, ``max_minutes`` or ``interrupted``."""
    last_checkpoint: Path | None
    """The checkpoint written last."""
    history: list[dict[str, float]] = field(default_factory=list)
    """Metrics of every iteration of this call, in order."""
    events: list[str] = field(default_factory=list)
    """What happened to the workers during this call (a dead env worker replaced, trainer ranks
    restarted from a checkpoint)."""


class Trainer:
    """Builds everything from a ``TrainConfig`` (restoring a checkpoint if ``cfg.resume`` says so)."""

    @logs_to_run_dir
    def __init__(self, cfg: TrainConfig, env: BatchedEnv | None = None) -> None:
        """``env``: a prebuilt env instead of the one ``cfg.env`` and ``cfg.distributed`` describe."""
        self._built_from = time.perf_counter()
        """When building began: building the env and the policy counts against ``max_minutes``."""
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        torch.set_num_threads(cfg.torch_num_threads)
        seed_everything(cfg.seed)
        self.runtime = make_training_runtime(cfg.distributed)
        """Where the env workers and trainer ranks run (``None``: all in this process)."""
        env = env if env is not None else build_training_env(cfg.env, cfg.distributed, self.runtime)
        self.env = wrap_with_reward_model(env, cfg.reward)
        parts = build_training_components(cfg, self.env)
        self.policy = parts.policy
        self.buffer = parts.buffer
        self.collector = parts.collector
        self.algorithm = parts.algorithm
        if cfg.distributed.trainer_ranks > 0:
            from vla_rl.distributed.ppo_ranks import build_data_parallel_ppo

            self.algorithm = build_data_parallel_ppo(cfg, self.policy, self.env, self.runtime)
        self.iteration = 0
        self.env_steps = 0
        self.wandb_run_id: str | None = None
        self.last_checkpoint: Path | None = None
        self._last_saved_iteration = -1
        self._stop_requested = False
        self.obs, _ = self.env.reset(seed=cfg.seed)
        checkpoint = self._find_resume_checkpoint()
        if checkpoint is not None:
            self._restore(checkpoint)

    # ------------------------------------------------------------------ loop
    @logs_to_run_dir
    def train(self) -> TrainResult:
        cfg = self.cfg
        record_run_start(self.run_dir, cfg)
        logger = self._build_logger()
        steps_per_iteration = cfg.algorithm.num_steps * self.env.num_envs
        clock = WallClock(cfg.max_minutes, time.perf_counter() - self._built_from)
        log.info("%s", self.plan())
        start = time.perf_counter()
        start_steps = self.env_steps
        history: list[dict[str, float]] = []
        events: list[str] = []
        worker_events_seen = len(_worker_events(self.env))
        start_iteration = self.iteration
        stop_reason = "total_env_steps"
        restore_signals = self._install_signal_handlers()
        try:
            while self.env_steps < cfg.total_env_steps:
                if self._stop_requested:
                    stop_reason = "interrupted"
                    break
                clock.reserve_s = self.final_evaluation_s(history)
                if not clock.room_for_update():
                    stop_reason = "max_minutes"
                    log.info(
                        "stopping after %d updates: another update and the final evaluation (about %.0f s) "
                        "would pass max_minutes=%g",
                        self.iteration,
                        clock.reserve_s,
                        cfg.max_minutes,
                    )
                    break
                t0 = time.perf_counter()
                self.obs, stats = self.collector.collect(self.obs)
                t1 = time.perf_counter()
                for event in _worker_events(self.env)[worker_events_seen:]:
                    worker_events_seen += 1
                    events.append(f"iteration {self.iteration + 1}: {event}")
                    log.warning(events[-1])
                try:
                    losses = self.algorithm.update(self.buffer)
                except getattr(self.algorithm, "death_errors", ()) as error:
                    events.append(self._restart_trainer_ranks(error))
                    log.warning(events[-1])
                    del history[self.iteration - start_iteration :]
                    continue
                t2 = time.perf_counter()
                clock.record_update(t2 - t0)
                self.iteration += 1
                self.env_steps += steps_per_iteration
                elapsed = time.perf_counter() - start
                metrics = _iteration_metrics(stats, losses)
                metrics["perf/env_steps_per_s"] = (self.env_steps - start_steps) / max(elapsed, 1e-9)
                metrics["perf/iteration_env_steps_per_s"] = steps_per_iteration / max(t2 - t0, 1e-9)
                metrics["perf/rollout_time_s"] = t1 - t0
                metrics["perf/update_time_s"] = t2 - t1
                history.append(metrics)
                if self.iteration == start_iteration + 1:
                    log.info("%s", self._estimate(clock, history))
                if self.iteration % cfg.logger.log_interval == 0:
                    logger.log(metrics, self.env_steps)
                if self.iteration % cfg.checkpoint_interval == 0:
                    self.save()
        finally:
            restore_signals()
            if self.iteration > 0 and (
                self.last_checkpoint is None
                or not self.last_checkpoint.name.endswith(f"{self.iteration:06d}")
            ):
                self.save()
            logger.close()
        return TrainResult(
            iterations=self.iteration,
            env_steps=self.env_steps,
            wall_time_s=time.perf_counter() - start,
            stop_reason=stop_reason,
            last_checkpoint=self.last_checkpoint,
            history=history,
            events=events,
        )

    def plan(self) -> str:
        """One line: what ``train`` (and ``vla-rl train``'s final evaluation) will do, and the cap."""
        cfg = self.cfg
        steps_per_update = cfg.algorithm.num_steps * self.env.num_envs
        updates = math.ceil(max(cfg.total_env_steps - self.env_steps, 0) / steps_per_update)
        evaluation = (
            f"a final evaluation of {cfg.eval.num_episodes} episodes on {cfg.eval.split}"
            if cfg.eval.num_episodes > 0
            else "no evaluation"
        )
        line = (
            f"plan: {updates} updates of {steps_per_update} env steps (to {cfg.total_env_steps} env steps), "
            f"{evaluation}; {describe_cap(cfg.max_minutes)}"
        )
        if cfg.max_minutes > 0 and cfg.eval.num_episodes > 0:
            line += (
                " (training stops early enough for the final evaluation, estimated from the rollouts' pace)"
            )
        return line

    def _estimate(self, clock: WallClock, history: list[dict[str, float]]) -> str:
        """After the first update: about how long the run will take at the measured pace."""
        steps_per_update = self.cfg.algorithm.num_steps * self.env.num_envs
        left = math.ceil(max(self.cfg.total_env_steps - self.env_steps, 0) / steps_per_update)
        seconds = clock.elapsed_s + left * clock.longest_update_s + self.final_evaluation_s(history)
        capped = f", capped at {self.cfg.max_minutes:g} min" if self.cfg.max_minutes > 0 else ""
        return (
            f"first update took {clock.longest_update_s:.1f} s: about {seconds / 60:.1f} min for "
            f"{left + 1} updates and the final evaluation{capped}"
        )

    def final_evaluation_s(self, history: list[dict[str, float]]) -> float:
        """Seconds kept for the final evaluation under ``max_minutes``: its batched env steps
        (episodes over worlds, times the episode length) at ``EVALUATION_PACE_FACTOR`` times the
        last rollout's time per batched step, plus ``EVALUATION_FIXED_S``; 0 without an evaluation."""
        ecfg = self.cfg.eval
        if ecfg.num_episodes <= 0:
            return 0.0
        if not history:
            return EVALUATION_FIXED_S
        worlds = min(ecfg.num_envs if ecfg.num_envs > 0 else self.env.num_envs, ecfg.num_episodes)
        batched_steps = math.ceil(ecfg.num_episodes / worlds) * self.env.max_episode_steps
        step_s = history[-1]["perf/rollout_time_s"] / self.cfg.algorithm.num_steps
        return EVALUATION_PACE_FACTOR * batched_steps * step_s + EVALUATION_FIXED_S

    def request_stop(self) -> None:
        """Finish the current iteration, write a checkpoint and return from ``train``."""
        self._stop_requested = True

    @logs_to_run_dir
    def evaluate(self, video: bool | None = None) -> EvalResult:
        """Evaluate the current policy as ``cfg.eval`` says; outputs go to ``<run_dir>/eval``."""
        ecfg = self.cfg.eval
        out_dir = self.run_dir / "eval"
        record = ecfg.video if video is None else video
        return evaluate(
            self.policy,
            self.cfg.env,
            ecfg.num_episodes,
            deterministic=ecfg.deterministic,
            video_dir=out_dir if record else None,
            split=ecfg.split,
            num_envs=ecfg.num_envs,
            video_envs=ecfg.video_envs,
            video_camera=ecfg.video_camera,
            video_size=ecfg.video_size,
            seed=self.cfg.seed + 1_000_003,
            summary_path=out_dir / "eval_summary.json",
        )

    def close(self) -> None:
        if hasattr(self.algorithm, "close"):
            self.algorithm.close()
        self.env.close()
        if self.runtime is not None:
            self.runtime.shutdown()

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything that changes during training except the policy weights."""
        try:
            env_state: dict[str, Any] | None = self.env.state_dict()
        except NotImplementedError:
            env_state = None
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "algorithm": self.algorithm.state_dict(),
            "rng": rng_state(),
            "env": env_state,
            "wandb_run_id": self.wandb_run_id,
        }

    def save(self) -> Path:
        self.last_checkpoint = save_checkpoint(
            self.run_dir,
            self.iteration,
            self.policy.state_dict(),
            self.state_dict(),
            self.cfg,
            keep=self.cfg.keep_checkpoints,
        )
        self._last_saved_iteration = self.iteration
        return self.last_checkpoint

    def _restart_trainer_ranks(self, error: BaseException) -> str:
        """A trainer rank died during an update: start new ranks and go back to the last checkpoint
        (policy, optimizer, env state, RNGs), so the run goes on as if the lost iterations had not
        happened. Returns what happened, for the run's events."""
        if self.last_checkpoint is None:
            raise RuntimeError("a trainer rank died before the first checkpoint was written") from error
        failed = self.iteration + 1
        self.algorithm.restart()
        self._restore(load_checkpoint(self.last_checkpoint))
        return (
            f"iteration {failed}: a trainer rank died ({type(error).__name__}); new trainer ranks "
            f"restarted from checkpoint {self.last_checkpoint.name} (iteration {self.iteration})"
        )

    def _find_resume_checkpoint(self) -> Checkpoint | None:
        return find_resume_checkpoint(self.cfg.resume, self.run_dir)

    def _restore(self, checkpoint: Checkpoint) -> None:
        state = checkpoint.trainer_state
        self.policy.load_state_dict(checkpoint.policy_state)
        self.algorithm.load_state_dict(state["algorithm"])
        self.iteration = int(state["iteration"])
        self.env_steps = int(state["env_steps"])
        self.wandb_run_id = state.get("wandb_run_id")
        if state.get("env") is not None:
            self.obs = self.env.load_state_dict(state["env"])
        else:
            log.warning("the environment cannot snapshot its state; resuming from fresh episodes")
            self.obs, _ = self.env.reset(seed=self.cfg.seed + self.iteration)
        set_rng_state(state["rng"])
        self.last_checkpoint = checkpoint.path
        self._last_saved_iteration = self.iteration
        log.info("resumed from %s (iteration %d)", checkpoint.path, self.iteration)

    # ---------------------------------------------------------------- helpers
    def _build_logger(self) -> MultiLogger:
        logger = build_logger(
            self.cfg.logger,
            self.run_dir,
            self.cfg.total_env_steps,
            OmegaConf.to_container(OmegaConf.structured(self.cfg)),
            initial_env_steps=self.env_steps,
            wandb_resume_id=self.wandb_run_id,
        )
        self.wandb_run_id = logger.wandb_run_id or self.wandb_run_id
        return logger

    def _install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM and the first Ctrl-C stop after the current iteration (with a checkpoint)."""
        return install_stop_handlers(self.request_stop, lambda: self._stop_requested)


def _worker_events(env: Any) -> list[str]:
    """The env workers' event log of ``env`` (looking through wrappers); empty for a local env."""
    while env is not None:
        if hasattr(env, "events"):
            return env.events
        env = getattr(env, "env", None)
    return []


def _iteration_metrics(stats: Any, losses: dict[str, float]) -> dict[str, float]:
    """Flatten rollout statistics and algorithm losses into ``group/name`` scalars (NaN dropped)."""
    metrics: dict[str, float] = {}
    raw = dataclasses.asdict(stats) if dataclasses.is_dataclass(stats) else dict(vars(stats))
    for name, value in raw.items():
        if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
            group = "perf" if name.endswith("_s") else "rollout"
            metrics[f"{group}/{name}"] = float(value)
    for name, value in losses.items():
        metrics[name if "/" in name else f"train/{name}"] = float(value)
    return metrics
