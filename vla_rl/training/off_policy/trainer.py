"""The off-policy learner in the one loop: ``ReplaySource`` batches -> ``SAC.update`` -> log.

``OffPolicyTrainer`` builds the env, the networks (``SACPolicy``), SAC (RLPD's settings come from
``configs/algorithm/rlpd.yaml``), the online replay and, with ``demos.path``, a replay of the
demonstrations, and hands them to ``vla_rl.training.loop``. Its budget counts env steps
(``total_env_steps``). A checkpoint holds the networks (``policy.safetensors``), SAC's state (target
critics, temperature, optimisers, generator), the source's counters and env snapshot, and the online
replay (``replay.safetensors``, written inside the checkpoint folder before it is moved into place)
and, with ``demos.interventions_as_demos``, the intervention replay (``interventions.safetensors``),
so a resumed run makes the same updates as one that never stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from vla_rl.algorithms.registry import algorithm_class
from vla_rl.algorithms.sac import SHIFT_SEED
from vla_rl.data.replay_buffer import ReplayBuffer
from vla_rl.data.replay_episodes import replay_from_episodes
from vla_rl.envs import make_env
from vla_rl.envs.base import BatchedEnv
from vla_rl.training.checkpoint import Checkpoint
from vla_rl.training.evaluate import EvalResult, evaluate_run
from vla_rl.training.loop import Run, RunResult, TrainingLoop
from vla_rl.training.off_policy.config import OffPolicyConfig
from vla_rl.training.off_policy.demo_sampler import intervention_replay
from vla_rl.training.off_policy.frozen_policy_env import load_frozen_policy, wrap_with_frozen_policy
from vla_rl.training.off_policy.networks import build_networks
from vla_rl.training.off_policy.remote_link import TransitionSpec
from vla_rl.training.off_policy.remote_source import RemoteSource
from vla_rl.training.off_policy.replay_source import ReplaySource
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.sft.demonstrations import load_demonstrations

REPLAY_FILENAME = "replay.safetensors"
INTERVENTIONS_FILENAME = "interventions.safetensors"


@dataclass
class OffPolicyResult(RunResult):
    """``RunResult`` (``stop_reason``: ``total_env_steps``, ``max_minutes`` or ``interrupted``), the
    env steps and the evaluations."""

    env_steps: int = 0
    """Env steps (transitions) collected in total."""
    evaluations: list[tuple[int, EvalResult]] = field(default_factory=list)
    """(env steps, result) of every evaluation of this run."""


class OffPolicyTrainer(TrainingLoop):
    """SAC / RLPD on a state task, from an ``OffPolicyConfig``."""

    budget_reason = "total_env_steps"
    time_reason = "max_minutes"
    log_unit = "step"
    saves_pretrained = False
    result_type = OffPolicyResult

    @logs_to_run_dir
    def __init__(self, cfg: OffPolicyConfig, env: BatchedEnv | None = None) -> None:
        self.begin(cfg)
        self.env = env if env is not None else make_env(cfg.env)
        self.frozen_policy = load_frozen_policy(cfg.frozen_policy, cfg.device)
        self.env = self.wrap_env(self.env)
        action_dim = self.env.action_space.shape[0]
        acfg = cfg.algorithm
        self.policy = build_networks(cfg, self.env.observation_space, action_dim).to(cfg.device)
        self.algorithm = algorithm_class(acfg.name)(
            self.policy.actor,
            self.policy.critic,
            self.policy.encode_for_algorithm(),
            acfg,
            generator=torch.Generator(cfg.device).manual_seed(cfg.seed),
            shift_generator=torch.Generator().manual_seed(cfg.seed + SHIFT_SEED),
        )
        keys = cfg.policy.obs_keys
        self.replay = ReplayBuffer(cfg.replay.capacity, self.env.num_envs, device=cfg.device, obs_keys=keys)
        demos = None
        if cfg.demos.path is not None:
            episodes = load_demonstrations(cfg.demos.path, cfg.demos.max_episodes)
            demos = replay_from_episodes(
                episodes, device=cfg.device, obs_keys=keys, success_terminates=cfg.demos.success_terminates
            )
        self.interventions = (
            intervention_replay(cfg.demos.intervention_capacity, cfg.device, keys)
            if cfg.demos.interventions_as_demos
            else None
        )
        """The transitions that a person or an expert chose, pooled with ``demos`` (or None)."""
        self.source: ReplaySource | RemoteSource
        if cfg.source == "remote":  # actors elsewhere; vla_rl.real_world.learner_server serves them
            spec = TransitionSpec.of_space(self.env.observation_space, keys, action_dim, self.env.num_envs)
            self.source = RemoteSource(
                spec,
                self.replay,
                cfg.replay,
                acfg.utd_ratio,
                cfg.seed,
                self.policy.acting(),
                cfg.remote.publish_interval_updates,
                demos,
                cfg.demos.share,
                self.interventions,
            )
        else:
            self.source = ReplaySource(
                self.env,
                self.replay,
                cfg.replay,
                acfg.utd_ratio,
                cfg.seed,
                demos,
                cfg.demos.share,
                self.interventions,
            )
            self.source.actor = lambda obs: self.algorithm.act(obs)
        self.evaluations: list[tuple[int, EvalResult]] = []
        self.resume(self._find_resume_checkpoint())

    @property
    def env_steps(self) -> int:
        return self.source.env_steps

    # ----- the loop's hooks -------------------------------------------------------------------------------
    def log_step(self) -> int:
        return self.env_steps

    def budget_spent(self) -> bool:
        """Remote: once the updates account for ``total_env_steps`` transitions (more may have arrived)."""
        if isinstance(self.source, RemoteSource):
            return self.source.used_steps >= self.cfg.total_env_steps
        return super().budget_spent()

    def stop_reason(self, run: Run) -> str | None:
        """A remote source first publishes the weights, then waits for the data of the next update
        (or a stop request, or the end of ``max_minutes``)."""
        if isinstance(self.source, RemoteSource):
            self.source.publish(self.iteration)
            clock = self.clock
            assert clock is not None, "stop_reason runs inside train"
            self.source.wait_for_data(lambda: self._stop_requested or not clock.room_for_update())
        return super().stop_reason(run)

    def advance(self, metrics: dict[str, float], batch_s: float, update_s: float) -> dict[str, float]:
        metrics["perf/rollout_time_s"] = batch_s
        metrics["perf/update_time_s"] = update_s
        metrics["replay/transitions"] = float(len(self.replay))
        if self.interventions is not None:
            metrics["replay/intervention_transitions"] = float(len(self.interventions))
        return metrics

    def after_update(self, last: bool, run: Run) -> None:
        ecfg = self.cfg.eval
        interval = ecfg.interval_env_steps
        steps_per_update = self.cfg.replay.env_steps_per_update * self.env.num_envs
        crossed = (
            interval > 0 and self.env_steps // interval > (self.env_steps - steps_per_update) // interval
        )
        if crossed and not last and ecfg.num_episodes > 0:
            self.record_evaluation()

    def finish(self, run: Run) -> None:
        if run.stop_reason != "interrupted" and self.cfg.eval.num_episodes > 0:
            self.record_evaluation()

    def record_evaluation(self) -> None:
        result = self.evaluate()
        self.evaluations.append((self.env_steps, result))
        self.logger.log(
            {"eval/success_rate": result.success_rate, "eval/mean_return": result.mean_return}, self.env_steps
        )
        self.log.info("env step %d: success %.1f %%", self.env_steps, 100 * result.success_rate)

    @logs_to_run_dir
    def evaluate(self) -> EvalResult:
        """The current policy on ``cfg.eval``'s episodes; the summary goes to ``<run_dir>/eval``."""
        name = f"eval_env_step_{self.env_steps:09d}.json"
        return evaluate_run(self.policy, self.cfg, self.run_dir / "eval", False, name, wrap_env=self.wrap_env)

    def wrap_env(self, env: BatchedEnv) -> BatchedEnv:
        """``env`` as the learner acts in it: through the frozen policy of ``frozen_policy``, if any."""
        return wrap_with_frozen_policy(env, self.frozen_policy, self.cfg.frozen_policy)

    # ----- checkpoints ------------------------------------------------------------------------------------
    def write_checkpoint_files(self, directory: Path) -> None:
        super().write_checkpoint_files(directory)
        self.replay.save(directory / REPLAY_FILENAME)
        if self.interventions is not None:
            self.interventions.save(directory / INTERVENTIONS_FILENAME)

    def resume(self, checkpoint: Checkpoint | None) -> None:
        super().resume(checkpoint)
        if checkpoint is None:
            return
        self.replay.load_state_dict(ReplayBuffer.load(checkpoint.path / REPLAY_FILENAME).state_dict())
        saved = checkpoint.path / INTERVENTIONS_FILENAME
        if self.interventions is not None and saved.is_file():  # absent: a checkpoint of an older run
            self.interventions.load_state_dict(ReplayBuffer.load(saved).state_dict())

    def plan(self) -> str:
        cfg = self.cfg
        held = self.source.sampler.demos
        demos = f", {len(held)} demonstration transitions" if held is not None else ""
        per_update = cfg.replay.env_steps_per_update * self.env.num_envs
        return (
            f"plan: {cfg.total_env_steps} env steps ({cfg.replay.learning_starts} random first), "
            f"{cfg.algorithm.utd_ratio} critic steps per {per_update} env steps{demos}; "
            f"cap {cfg.max_minutes:g} min"
        )

    def updates_left(self) -> int:
        per_update = self.cfg.replay.env_steps_per_update * self.env.num_envs
        return (
            max(self.cfg.total_env_steps - max(self.env_steps, self.cfg.replay.learning_starts), 0)
            // per_update
        )
