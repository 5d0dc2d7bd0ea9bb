"""RL fine-tuning of a chunk policy: rollout -> (recompute) -> update, evaluated against its start.

Each iteration of the one loop (``vla_rl.training.loop``) takes a batch from its source and hands it
to the algorithm named in ``cfg.algorithm`` (``vla_ppo``: one continuous rollout of
``num_decisions`` decisions per world; ``vla_grpo``: one episode per world from shared group seeds,
repeated until enough informative groups are in or ``max_sampling_rounds`` is reached; see
``vla_rl.training.sources``). The policy is evaluated before the first iteration, so every run
reports its own starting point, every ``eval.interval`` iterations and at the end, on ``env.split``
and on ``eval.ood_splits``. Rollout, log-prob recomputation and update times are logged separately.

A checkpoint (``<run_dir>/checkpoints/iter_XXXXXX``) holds the policy as its ``save_pretrained``
folder (``policy/``), the optimizer, the RNG states, the environment's state where it can snapshot
one (PPO's continuous rollouts go on mid-episode after a resume), the iteration and the evaluation
history, so a resumed run makes the same updates as one that never stopped. Every schedule counts
updates (or gradient steps); the wall clock (``max_minutes``) only decides when to stop.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from vla_rl.algorithms.registry import build_chunk_algorithm
from vla_rl.config.load import ConfigError
from vla_rl.distributed.layout import make_training_runtime
from vla_rl.distributed.remote_env import build_training_env
from vla_rl.envs.base import BatchedEnv
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.rewards.env_wrapper import wrap_with_reward_model
from vla_rl.rollout.collector import RolloutCollector
from vla_rl.training.budget import describe_cap
from vla_rl.training.checkpoint import POLICY_DIRNAME, resolve_policy_dir
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.chunk_rl.exploration_anneal import exploration_at, exploration_metrics
from vla_rl.training.chunk_rl.learner import load_rl_learner, load_rl_policy
from vla_rl.training.env_fit import check_policy_env
from vla_rl.training.evaluate import EvalResult, evaluate_run
from vla_rl.training.loop import Run, RunResult, TrainingLoop
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.sources import GroupRollouts, Rollouts

EVALUATION_SHARE = 0.5
"""Under ``max_minutes``, the share of the cap the evaluations before and after may take."""


@dataclass
class RLResult(RunResult):
    """``RunResult`` (``stop_reason``: ``iterations``, ``time`` or ``interrupted``; ``wall_time_s``: the
    run's, across resumes) and the evaluations."""

    evaluations: list[dict[str, Any]] = field(default_factory=list)
    """``{"iteration", "minutes", "split", "success_rate", ...}`` of every evaluation, in order."""

    def success(self, iteration: int, split: str) -> float:
        """Success rate of the evaluation at ``iteration`` on ``split`` (NaN if none)."""
        for entry in self.evaluations:
            if entry["iteration"] == iteration and entry["split"] == split:
                return float(entry["success_rate"])
        return math.nan


def evaluate_rl_policy(
    policy: ChunkPolicy,
    cfg: VLARLConfig,
    split: str,
    num_episodes: int | None = None,
    deterministic: bool | None = None,
) -> EvalResult:
    """A run's evaluation of ``policy`` on ``split``: its episodes (seeds), execution and sampling
    settings; ``num_episodes`` and ``deterministic`` default to ``cfg.eval``'s."""
    given = {"num_episodes": num_episodes, "deterministic": deterministic}
    return evaluate_run(
        policy,
        cfg,
        split=split,
        execute_steps=cfg.algorithm.execute_steps,
        temperature=cfg.algorithm.temperature if cfg.eval.temperature is None else cfg.eval.temperature,
        **{name: value for name, value in given.items() if value is not None},
    )


class ChunkRLTrainer(TrainingLoop):
    """Chunk RL: a policy loaded from ``policy.init_from``, an env, the ``algorithm.name`` algorithm
    and its rollouts (``GroupRollouts`` for GRPO, ``Rollouts`` otherwise) in the one loop."""

    result_type = RLResult

    @logs_to_run_dir
    def __init__(self, cfg: VLARLConfig, env: BatchedEnv | None = None) -> None:
        """``env``: a prebuilt env instead of the one ``cfg.env`` and ``cfg.distributed`` describe."""
        self.begin(cfg)
        self.runtime = make_training_runtime(cfg.distributed)  # None: everything in this process
        checkpoint = self._find_resume_checkpoint()
        start_dir = (
            checkpoint.path / POLICY_DIRNAME if checkpoint else resolve_policy_dir(cfg.policy.init_from)
        )
        self.policy, self.reference = load_rl_learner(cfg, start_dir)
        acfg = cfg.algorithm
        self.algorithm = build_chunk_algorithm(acfg, self.policy, self.reference)
        if env is None:  # here, or on env workers
            env = build_training_env(cfg.env, cfg.distributed, self.runtime)
        try:
            check_policy_env(self.policy, env)  # an imported checkpoint meets the env, or a ConfigError
        except ConfigError:
            env.close()
            raise
        self.env = wrap_with_reward_model(env, cfg.reward)
        self.collector = RolloutCollector(
            self.env,
            self.policy,
            gamma=acfg.gamma,
            execute_steps=acfg.execute_steps,
            temperature=acfg.temperature,
            log_prob_level=acfg.log_prob_level,
            with_value=self.algorithm.uses_critic,
            reward_scale=acfg.reward_scale,
            reward=acfg.reward,
            progress_shaping=acfg.progress_shaping,
        )
        if self.algorithm.episodic:
            self.source: Rollouts = GroupRollouts(
                self.env, self.collector, acfg, cfg.seed, self.algorithm.grouped_rows
            )
        else:
            self.source = Rollouts(self.env, self.collector, cfg.seed, acfg.num_decisions)
        if cfg.distributed.trainer_ranks > 0:
            # The update on data-parallel ranks (the source keeps the local algorithm's grouped_rows).
            from vla_rl.distributed.chunk_ranks import build_data_parallel_chunk

            self.algorithm = build_data_parallel_chunk(cfg, self.policy, start_dir, self.runtime)
        self.evaluations: list[dict[str, Any]] = []
        self._final_splits = [cfg.env.split, *cfg.eval.ood_splits] if cfg.eval.num_episodes > 0 else []
        """The splits the final evaluation runs on."""
        self.resume(checkpoint)

    # ----- the loop's hooks -------------------------------------------------------------------------------

    def next_batch(self) -> tuple[Any, dict[str, float]]:
        """The policy's exploration moves to its annealed settings at this update first, so the
        rollout and its update see the same chains; the settings are logged with the rollout's metrics."""
        settings = exploration_at(self.cfg.policy, self.iteration)
        if settings:
            self.policy.set_exploration(**settings)  # type: ignore[operator]
        batch, metrics = self.source.next_batch()
        return batch, {**exploration_metrics(settings), **metrics}

    def advance(self, metrics: dict[str, float], batch_s: float, update_s: float) -> dict[str, float]:
        metrics["perf/elapsed_min"] = self.clock.elapsed_s / 60.0 if self.clock else 0.0
        return metrics

    def before_training(self) -> None:
        if self.iteration == 0 and not self.evaluations:
            self._evaluate_start()

    def after_update(self, last: bool, run: Run) -> None:
        cfg, clock = self.cfg, self.clock
        if cfg.eval.interval > 0 and self.iteration % cfg.eval.interval == 0 and not last:
            if clock.fits(self._evaluation_s(cfg.env.split) + clock.longest_update_s):
                self._evaluate_all(splits=[cfg.env.split])
            else:
                self.log.info("iteration %d: evaluation skipped to keep within max_minutes", self.iteration)

    def finish(self, run: Run) -> None:
        if run.stop_reason != "interrupted" and self._final_splits and self._unevaluated():
            self._evaluate_all(splits=self._final_splits)
        self.save()

    def extra_state(self) -> dict[str, Any]:
        return {
            **self.source.state_dict(),
            "policy_name": self.cfg.policy.name,
            "evaluations": self.evaluations,
        }

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.source.load_state_dict(state)
        self.evaluations = list(state.get("evaluations", []))

    def upgrade_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Checkpoints before the algorithms counted their own updates: the run's iteration."""
        return {**state, "algorithm": {"updates": int(state["iteration"]), **state["algorithm"]}}

    def restart_from_checkpoint(self, error: BaseException, run: Run) -> None:
        """A trainer rank died: new ranks go on from the last checkpoint, whose policy folder gives
        the policy its weights back (the updates since were lost with the rank); loaded before the
        checkpoint's RNG states are restored, since building a model draws from them."""
        if self.last_checkpoint is not None:  # (without one the loop gives up)
            saved = load_rl_policy(self.cfg, self.last_checkpoint / POLICY_DIRNAME)
            self.policy.load_state_dict(saved.state_dict())
        super().restart_from_checkpoint(error, run)

    def wall_time_s(self, run: Run) -> float:
        """The run's wall time, building and earlier ``train`` calls included."""
        return self.clock.elapsed_s if self.clock else 0.0

    def plan(self) -> str:
        """One line: what the run will do (updates, evaluations, cap) and the rule that keeps the cap."""
        cfg = self.cfg
        splits = [cfg.env.split, *cfg.eval.ood_splits]
        if cfg.eval.num_episodes > 0:
            evaluations = (
                f"evaluations of {cfg.eval.num_episodes} episodes on {', '.join(splits)} before and after"
            )
            if cfg.eval.interval > 0:
                evaluations += f", on {cfg.env.split} every {cfg.eval.interval} updates"
        else:
            evaluations = "no evaluations"
        cap = describe_cap(cfg.max_minutes)
        updates = f"{self.updates_left()} updates (to update {cfg.iterations})"
        line = f"plan: {updates}; {evaluations}; {cap}"
        if cfg.max_minutes > 0:
            line += (
                " (training stops early enough for the final evaluation, timed on the first; "
                "out-of-distribution splits are dropped if the evaluations would take over half the cap)"
            )
        return line

    def interval_evaluations_s(self, updates: int) -> float:
        cfg = self.cfg
        if cfg.eval.interval <= 0 or cfg.eval.num_episodes <= 0:
            return 0.0
        return updates // cfg.eval.interval * self._evaluation_s(cfg.env.split)

    @logs_to_run_dir
    def evaluate(self, split: str) -> EvalResult:
        return evaluate_rl_policy(self.policy, self.cfg, split)

    def _evaluate_start(self) -> None:
        """The evaluation before the first update: ``env.split`` first, timed; with a cap, the
        out-of-distribution splits are dropped from the run when the evaluations before and after
        on every split would take more than ``EVALUATION_SHARE`` of it, and the final evaluation is
        dropped when even ``env.split``'s two would."""
        cfg = self.cfg
        if cfg.eval.num_episodes <= 0:
            return
        self._evaluate_all(splits=[cfg.env.split])
        seconds, cap_s = self._evaluation_s(cfg.env.split), cfg.max_minutes * 60.0
        if cfg.max_minutes > 0 and 2 * seconds > EVALUATION_SHARE * cap_s:
            self._final_splits = []
            self.log.warning(
                "an evaluation of %s took %.0f s: with max_minutes=%g there is no room for evaluations "
                "before and after, so this run ends without a final evaluation (evaluate its checkpoint "
                "with benchmarks.rl_checkpoint_eval)",
                cfg.env.split,
                seconds,
                cfg.max_minutes,
            )
            return
        if cfg.max_minutes > 0 and 2 * seconds * len(self._final_splits) > EVALUATION_SHARE * cap_s:
            self.log.warning(
                "an evaluation of %s took %.0f s: with max_minutes=%g this run evaluates %s only "
                "(out-of-distribution splits %s dropped)",
                cfg.env.split,
                seconds,
                cfg.max_minutes,
                cfg.env.split,
                cfg.eval.ood_splits,
            )
            self._final_splits = [cfg.env.split]
        self._evaluate_all(splits=self._final_splits[1:])

    def _evaluation_s(self, split: str) -> float:
        """Seconds the last evaluation of ``split`` took (that of ``env.split`` if it had none)."""
        for wanted in (split, self.cfg.env.split):
            for entry in reversed(self.evaluations):
                if entry["split"] == wanted and "seconds" in entry:
                    return float(entry["seconds"])
        return 0.0

    def final_evaluation_s(self, history: list[dict[str, float]]) -> float:
        return sum(self._evaluation_s(split) for split in self._final_splits)

    def _unevaluated(self) -> bool:
        """No evaluation at the current iteration yet (a run stopped before its first update has
        its starting evaluation as its last)."""
        return not any(entry["iteration"] == self.iteration for entry in self.evaluations)

    def _evaluate_all(self, splits: list[str]) -> None:
        if self.cfg.eval.num_episodes <= 0:
            return
        for split in splits:
            started = time.perf_counter()
            evaluation = self.evaluate(split)
            entry: dict[str, Any] = {
                "iteration": self.iteration,
                "minutes": self.clock.elapsed_s / 60.0,
                "seconds": time.perf_counter() - started,
            }
            entry.update({k: v for k, v in asdict(evaluation).items() if k != "video_path"})
            self.evaluations.append(entry)
            self.logger.log({f"eval_{split}/success_rate": evaluation.success_rate}, self.iteration)
            self.log.info(
                "iteration %d: %s success %.1f %%", self.iteration, split, 100 * evaluation.success_rate
            )
        (self.run_dir / "evaluations.json").write_text(json.dumps(self.evaluations, indent=1))
