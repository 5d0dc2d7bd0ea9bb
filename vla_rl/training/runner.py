"""State PPO: an env, a state policy, a ``RolloutBuffer`` source and PPO, in the one loop.

``Trainer`` builds them from a ``TrainConfig`` (the env where ``cfg.distributed`` says: in this
process or on env workers; PPO on data-parallel trainer ranks when asked; or asynchronous PPO, its
rollouts collected by rollout workers with the weights they were last sent) and hands them to
``vla_rl.training.loop``. Its budget counts env steps (``total_env_steps``) and its checkpoints hold
the policy's ``state_dict`` (``policy.safetensors``), the env steps and the simulator state where
the backend can snapshot one, so a resumed run produces the same numbers as one that never stopped.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from vla_rl.config.schema import TrainConfig
from vla_rl.distributed.layout import make_training_runtime
from vla_rl.distributed.remote_env import build_training_env
from vla_rl.envs.base import BatchedEnv
from vla_rl.rewards.env_wrapper import wrap_with_reward_model
from vla_rl.training.budget import describe_cap
from vla_rl.training.components import build_learner, build_training_components
from vla_rl.training.evaluate import EvalResult, evaluate_run
from vla_rl.training.loop import RunResult, TrainingLoop
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.seeding import seed_everything
from vla_rl.training.sources import Rollouts

EVALUATION_PACE_FACTOR = 2.0
"""The final evaluation is budgeted at this many times the training rollouts' time per batched env
step (a fresh env, deterministic actions, bookkeeping per episode) ..."""
EVALUATION_FIXED_S = 10.0
"""... plus this many seconds (building its env, recording and writing its video)."""


@dataclass
class TrainResult(RunResult):
    """``RunResult`` (``stop_reason``: ``total_env_steps``, ``max_minutes`` or ``interrupted``) and
    the env steps."""

    env_steps: int = 0
    """Environment steps collected in total."""


class Trainer(TrainingLoop):
    """State PPO: builds everything from a ``TrainConfig`` (restoring a checkpoint if ``cfg.resume``
    says so) and trains it in the one loop (``vla_rl.training.loop``)."""

    budget_reason = "total_env_steps"
    time_reason = "max_minutes"
    log_unit = "step"
    saves_pretrained = False
    result_type = TrainResult

    @logs_to_run_dir
    def __init__(self, cfg: TrainConfig, env: BatchedEnv | None = None) -> None:
        """``env``: a prebuilt env instead of the one ``cfg.env`` and ``cfg.distributed`` describe."""
        self.begin(cfg)
        self.runtime = make_training_runtime(cfg.distributed)
        if cfg.distributed.rollout_workers > 0:
            if env is not None:
                raise ValueError("asynchronous PPO builds an env in each rollout worker, not a prebuilt one")
            self._build_async(cfg)
        else:
            env = env if env is not None else build_training_env(cfg.env, cfg.distributed, self.runtime)
            self.env = wrap_with_reward_model(env, cfg.reward)
            parts = build_training_components(cfg, self.env)
            self.policy, self.collector, self.algorithm = parts.policy, parts.collector, parts.algorithm
            if cfg.distributed.trainer_ranks > 0:
                from vla_rl.distributed.ppo_ranks import build_data_parallel_ppo

                self.algorithm = build_data_parallel_ppo(cfg, self.policy, self.env, self.runtime)
            self.source = Rollouts(self.env, self.collector, cfg.seed)
            self.num_envs, self.max_episode_steps = self.env.num_envs, self.env.max_episode_steps
        self.env_steps = 0
        self._pace_from = (time.perf_counter(), 0)
        """When and at which env step the env steps/s count starts (each ``train`` call resets it)."""
        self.steps_per_update = cfg.algorithm.num_steps * self.num_envs
        self.resume(self._find_resume_checkpoint())

    def _build_async(self, cfg: TrainConfig) -> None:
        """Asynchronous PPO: the rollout workers hold the envs (``env`` stays None) and the source
        hands out their rollouts (``vla_rl.distributed.async_ppo``)."""
        from vla_rl.distributed.async_ppo import AsyncRollouts, spawn_rollout_workers

        workers, spec = spawn_rollout_workers(cfg, self.runtime)
        seed_everything(cfg.seed)  # the same initial weights whether the workers were built here or not
        spaces = spec["observation_space"], spec["action_space"]
        self.policy, buffer, self.algorithm = build_learner(
            cfg, *spaces, spec["num_envs"], "cpu", spec["action_scale"]
        )
        self.source = AsyncRollouts(self.runtime, workers, self.policy, buffer, cfg.distributed.max_staleness)
        self.num_envs, self.max_episode_steps = spec["num_envs"], spec["max_episode_steps"]

    # ----- the loop's hooks -------------------------------------------------------------------------------
    def log_step(self) -> int:
        return self.env_steps

    def before_training(self) -> None:
        self._pace_from = (time.perf_counter(), self.env_steps)

    def advance(self, metrics: dict[str, float], batch_s: float, update_s: float) -> dict[str, float]:
        self.env_steps += self.steps_per_update
        started_s, started_steps = self._pace_from
        elapsed = time.perf_counter() - started_s
        metrics["perf/env_steps_per_s"] = (self.env_steps - started_steps) / max(elapsed, 1e-9)
        metrics["perf/iteration_env_steps_per_s"] = self.steps_per_update / max(batch_s + update_s, 1e-9)
        # The batch's time, or the collection's where that was longer: an asynchronous rollout was
        # collected while the learner waited less (the final evaluation is budgeted from this).
        metrics["perf/rollout_time_s"] = max(batch_s, metrics.get("perf/rollout_time_s", 0.0))
        metrics["perf/update_time_s"] = update_s
        return metrics

    def extra_state(self) -> dict[str, Any]:
        return {"env_steps": self.env_steps, **self.source.state_dict()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.env_steps = int(state["env_steps"])
        self.source.load_state_dict(state)

    def plan(self) -> str:
        """One line: what ``train`` (and ``vla-rl train``'s final evaluation) will do, and the cap."""
        cfg = self.cfg
        evaluation = (
            f"a final evaluation of {cfg.eval.num_episodes} episodes on {cfg.eval.split}"
            if cfg.eval.num_episodes > 0
            else "no evaluation"
        )
        line = (
            f"plan: {self.updates_left()} updates of {self.steps_per_update} env steps "
            f"(to {cfg.total_env_steps} env steps), {evaluation}; {describe_cap(cfg.max_minutes)}"
        )
        if cfg.max_minutes > 0 and cfg.eval.num_episodes > 0:
            line += (
                " (training stops early enough for the final evaluation, estimated from the rollouts' pace)"
            )
        return line

    def updates_left(self) -> int:
        return math.ceil(max(self.cfg.total_env_steps - self.env_steps, 0) / self.steps_per_update)

    def final_evaluation_s(self, history: list[dict[str, float]]) -> float:
        """Seconds kept for the final evaluation under ``max_minutes``: its batched env steps
        (episodes over worlds, times the episode length) at ``EVALUATION_PACE_FACTOR`` times the
        last rollout's time per batched step, plus ``EVALUATION_FIXED_S``; 0 without an evaluation."""
        ecfg = self.cfg.eval
        if ecfg.num_episodes <= 0:
            return 0.0
        if not history:
            return EVALUATION_FIXED_S
        worlds = min(ecfg.num_envs if ecfg.num_envs > 0 else self.num_envs, ecfg.num_episodes)
        batched_steps = math.ceil(ecfg.num_episodes / worlds) * self.max_episode_steps
        step_s = history[-1]["perf/rollout_time_s"] / self.cfg.algorithm.num_steps
        return EVALUATION_PACE_FACTOR * batched_steps * step_s + EVALUATION_FIXED_S

    @logs_to_run_dir
    def evaluate(self, video: bool | None = None) -> EvalResult:
        """Evaluate the current policy as ``cfg.eval`` says; outputs go to ``<run_dir>/eval``."""
        return evaluate_run(self.policy, self.cfg, self.run_dir / "eval", video)
