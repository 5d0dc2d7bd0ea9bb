"""RL fine-tuning of a chunk policy: rollout -> (recompute) -> update, evaluated against its start.

Each iteration collects rollouts with ``ChunkCollector`` and hands them to the algorithm named in
``cfg.algorithm`` (``vla_ppo``: one continuous rollout of ``num_decisions`` decisions per world;
``vla_grpo``: one episode per world from shared group seeds, repeated until enough informative
groups are in or ``max_sampling_rounds`` is reached). The policy is evaluated before the first
iteration, so every run reports its own starting point, every ``eval.interval`` iterations and at the
end, on ``env.split`` and on ``eval.ood_splits``. Rollout, log-prob recomputation and update times
are logged separately.

A checkpoint (``<run_dir>/checkpoints/iter_XXXXXX``) holds the policy as its ``save_pretrained``
folder (``policy/``), the optimizer, the RNG states, the environment's state where it can snapshot
one (PPO's continuous rollouts go on mid-episode after a resume), the iteration and the evaluation
history, so a resumed run makes the same updates as one that never stopped. Every schedule counts
updates (or gradient steps); the wall clock (``max_minutes``) only decides when to stop.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from vla_rl.algorithms.registry import build_chunk_algorithm
from vla_rl.config.load import ConfigError
from vla_rl.envs import make_env
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.rewards.env_wrapper import wrap_with_reward_model
from vla_rl.rollout.chunk_collector import ChunkCollector, ChunkRolloutStats
from vla_rl.rollout.seed_curriculum import SeedCurriculum
from vla_rl.training.budget import WallClock, describe_cap
from vla_rl.training.checkpoint import (
    POLICY_DIRNAME,
    Checkpoint,
    find_resume_checkpoint,
    resolve_policy_dir,
    save_checkpoint,
)
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.chunk_rl.exploration_anneal import exploration_at, exploration_metrics
from vla_rl.training.evaluate import EvalResult
from vla_rl.training.loggers import MultiLogger, build_logger
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.run_record import record_run_start
from vla_rl.training.seeding import rng_state, seed_everything, set_rng_state
from vla_rl.training.sft.evaluate_chunks import evaluate_chunk_policy
from vla_rl.training.stop_signals import install_stop_handlers

log = logging.getLogger(__name__)

EVAL_SEED_OFFSET = 1_000_003
EVALUATION_SHARE = 0.5
"""Under ``max_minutes``, the share of the cap the evaluations before and after may take."""
GROUP_SEED_STRIDE = 7919
"""Without a curriculum, group k of the run resets from ``seed * GROUP_SEED_STRIDE**2 + k``."""


@dataclass
class RLResult:
    iterations: int
    wall_time_s: float
    stop_reason: str
    """``iterations``, ``time`` (``max_minutes`` reached) or ``interrupted``."""
    last_checkpoint: Path | None
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    """``{"iteration", "minutes", "split", "success_rate", ...}`` of every evaluation, in order."""
    history: list[dict[str, float]] = field(default_factory=list)

    def success(self, iteration: int, split: str) -> float:
        """Success rate of the evaluation at ``iteration`` on ``split`` (NaN if none)."""
        for entry in self.evaluations:
            if entry["iteration"] == iteration and entry["split"] == split:
                return float(entry["success_rate"])
        return math.nan


def load_rl_policy(cfg: VLARLConfig, directory: Path, update: int = 0) -> ChunkPolicy:
    """The ``policy.name`` policy saved in ``directory``, with ``policy.exploration`` applied (and
    ``policy.exploration_final`` as annealed at ``update``), in eval mode
    (RL samples, recomputes and trains without dropout); an autoregressive token policy decodes only
    the ``algorithm.execute_steps`` actions that run (``TokenVLA.limit_decoding``)."""
    policy = load_chunk_policy(cfg.policy.name, directory).to(torch.device(cfg.device)).eval()
    limit_decoding = getattr(policy, "limit_decoding", None)
    if limit_decoding is not None:
        limit_decoding(cfg.algorithm.execute_steps)
    settings = {**cfg.policy.exploration.given(), **exploration_at(cfg.policy, update)}
    if settings:
        set_exploration = getattr(policy, "set_exploration", None)
        if set_exploration is None:
            raise ConfigError(
                f"config key 'policy.exploration': {cfg.policy.name} has no exploration settings "
                "(token policies explore through algorithm.temperature)"
            )
        set_exploration(**settings)
    return policy


def evaluate_rl_policy(
    policy: ChunkPolicy,
    cfg: VLARLConfig,
    split: str,
    num_episodes: int | None = None,
    deterministic: bool | None = None,
) -> EvalResult:
    """A run's evaluation of ``policy`` on ``split``: its episodes (seeds), execution and sampling
    settings; ``num_episodes`` and ``deterministic`` default to ``cfg.eval``'s."""
    return evaluate_chunk_policy(
        policy,
        cfg.env,
        cfg.eval.num_episodes if num_episodes is None else num_episodes,
        cfg.algorithm.execute_steps,
        seed=cfg.seed + EVAL_SEED_OFFSET,
        deterministic=cfg.eval.deterministic if deterministic is None else deterministic,
        temperature=cfg.algorithm.temperature if cfg.eval.temperature is None else cfg.eval.temperature,
        num_envs=cfg.eval.num_envs,
        split=split,
    )


class ChunkRLTrainer:
    @logs_to_run_dir
    def __init__(self, cfg: VLARLConfig) -> None:
        self._built_from = time.perf_counter()
        """When building began: loading the policies and the env counts against ``max_minutes``."""
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        torch.set_num_threads(cfg.torch_num_threads)
        seed_everything(cfg.seed)
        checkpoint = self._find_resume_checkpoint()
        start_dir = (
            checkpoint.path / POLICY_DIRNAME if checkpoint else resolve_policy_dir(cfg.policy.init_from)
        )
        self.policy = self._load_policy(start_dir)
        self._freeze(self.policy)
        acfg = cfg.algorithm
        self.reference = None
        if acfg.kl_coef > 0:
            reference_dir = resolve_policy_dir(cfg.policy.init_from) if cfg.policy.init_from else start_dir
            self.reference = self._load_policy(reference_dir).eval().requires_grad_(False)
        self.algorithm = build_chunk_algorithm(acfg, self.policy, self.reference)
        self.env = wrap_with_reward_model(make_env(cfg.env), cfg.reward)
        self.collector = ChunkCollector(
            self.env,
            self.policy,
            acfg.execute_steps,
            acfg.gamma,
            temperature=acfg.temperature,
            log_prob_level=acfg.log_prob_level,
            with_value=self.algorithm.uses_critic,
            reward_scale=acfg.reward_scale,
            reward=acfg.reward,
            progress_shaping=acfg.progress_shaping,
        )
        self.obs, _ = self.env.reset(seed=cfg.seed)
        self.curriculum = SeedCurriculum(acfg.curriculum_pool, cfg.seed) if acfg.curriculum_pool > 0 else None
        self.iteration = 0
        self.group_counter = 0
        self.evaluations: list[dict[str, Any]] = []
        self.wandb_run_id: str | None = None
        self.last_checkpoint: Path | None = None
        self.elapsed_s = 0.0
        """Wall-clock seconds the run has taken so far, across resumes (only ``max_minutes`` reads it)."""
        self.clock: WallClock | None = None
        self._save_s = 0.0
        """The longest checkpoint write so far (kept in reserve under ``max_minutes``)."""
        self._final_splits = [cfg.env.split, *cfg.eval.ood_splits] if cfg.eval.num_episodes > 0 else []
        """The splits the final evaluation runs on."""
        self._stop_requested = False
        if checkpoint is not None:
            self._restore(checkpoint)

    def _load_policy(self, directory: Path) -> ChunkPolicy:
        return load_rl_policy(self.cfg, directory)

    def _freeze(self, policy: ChunkPolicy) -> None:
        prefixes = tuple(self.cfg.policy.freeze)
        if not prefixes:
            return
        names = [name for name, _ in policy.named_parameters()]
        unmatched = [prefix for prefix in prefixes if not any(name.startswith(prefix) for name in names)]
        if unmatched:
            raise ConfigError(f"config key 'policy.freeze': no parameter name starts with {unmatched}")
        for name, parameter in policy.named_parameters():
            if name.startswith(prefixes):
                parameter.requires_grad_(False)

    # ----- one iteration ----------------------------------------------------------------------------------

    def run_iteration(self) -> dict[str, float]:
        """Collect, recompute, update; returns the iteration's metrics."""
        acfg = self.cfg.algorithm
        if self.algorithm.episodic:
            metrics, stats = self._grpo_iteration()
        else:
            batch, self.obs, stats = self.collector.collect(self.obs, acfg.num_decisions)
            metrics = self.algorithm.update(batch, self.iteration)
        self.iteration += 1
        return {**rollout_metrics(stats), **{f"train/{k}": v for k, v in metrics.items()}}

    def _grpo_iteration(self) -> tuple[dict[str, float], ChunkRolloutStats]:
        acfg = self.cfg.algorithm
        groups_per_rollout = self.env.num_envs // acfg.group_size
        wanted = acfg.groups_per_update or groups_per_rollout
        max_decisions = math.ceil(self.env.max_episode_steps / acfg.execute_steps) + 1
        rollouts, all_stats, kept = [], [], 0
        for _ in range(acfg.max_sampling_rounds):
            group_seeds = self._group_seeds(groups_per_rollout)
            seeds = [self.env.world_seed(seed, 0) for seed in group_seeds for _ in range(acfg.group_size)]
            batch, success, returns, stats = self.collector.collect_episodes(seeds, max_decisions)
            if self.curriculum is not None:
                group_success = success.float().view(-1, acfg.group_size).mean(dim=1).tolist()
                self.curriculum.update(group_seeds, group_success)
            grouped = self.algorithm.grouped_rows(batch, success, returns)
            rollouts.append(grouped)
            all_stats.append(stats)
            kept += grouped.kept_groups
            if kept >= wanted:
                break
        metrics = self.algorithm.update(rollouts)
        metrics["sampling_rounds"] = float(len(rollouts))
        return metrics, merge_stats(all_stats)

    def _group_seeds(self, count: int) -> list[int]:
        """Fresh seeds (distinct for every group of the run), or draws from the curriculum's pool."""
        if self.curriculum is not None:
            return self.curriculum.draw(count)
        first = self.cfg.seed * GROUP_SEED_STRIDE**2 + self.group_counter
        self.group_counter += count
        return list(range(first, first + count))

    # ----- the loop ---------------------------------------------------------------------------------------

    @logs_to_run_dir
    def train(self) -> RLResult:
        cfg = self.cfg
        record_run_start(self.run_dir, cfg)
        logger = self._build_logger()
        # a resumed run continues its clock; building this trainer counts too
        self.clock = clock = WallClock(
            cfg.max_minutes, self.elapsed_s + time.perf_counter() - self._built_from
        )
        result = RLResult(self.iteration, 0.0, "iterations", None)
        restore_signals = install_stop_handlers(self.request_stop, lambda: self._stop_requested)
        log.info("%s", self.plan())
        try:
            if self.iteration == 0 and not self.evaluations:
                self._evaluate_start(logger)
            first_iteration = self.iteration
            while self.iteration < cfg.iterations:
                if self._stop_requested:
                    result.stop_reason = "interrupted"
                    break
                clock.reserve_s = self._final_evaluation_s() + self._save_s
                if not clock.room_for_update():
                    result.stop_reason = "time"
                    log.info(
                        "stopping after %d updates: another update and the final evaluation would pass "
                        "max_minutes=%g",
                        self.iteration,
                        cfg.max_minutes,
                    )
                    break
                started = time.perf_counter()
                exploration = self.anneal_exploration(self.iteration)
                metrics = {**exploration, **self.run_iteration()}
                clock.record_update(time.perf_counter() - started)
                metrics["perf/elapsed_min"] = clock.elapsed_s / 60.0
                result.history.append(metrics)
                if self.iteration == first_iteration + 1:
                    log.info("%s", self._estimate())
                if self.iteration % cfg.logger.log_interval == 0:
                    logger.log(metrics, self.iteration)
                last = self.iteration >= cfg.iterations or not clock.room_for_update()
                if cfg.eval.interval > 0 and self.iteration % cfg.eval.interval == 0 and not last:
                    if clock.fits(self._evaluation_s(cfg.env.split) + clock.longest_update_s):
                        self._evaluate_all(logger, splits=[cfg.env.split])
                    else:
                        log.info(
                            "iteration %d: evaluation skipped to keep within max_minutes", self.iteration
                        )
                if self.iteration % cfg.checkpoint_interval == 0 and not last:
                    self.save()
            if result.stop_reason != "interrupted" and self._final_splits and self._unevaluated():
                self._evaluate_all(logger, splits=self._final_splits)
            restore_signals()
            self.save()
        finally:
            restore_signals()
            if self.iteration > 0 and self._unsaved():
                self.save()
            logger.close()
        result.iterations = self.iteration
        result.wall_time_s = clock.elapsed_s
        result.last_checkpoint = self.last_checkpoint
        result.evaluations = list(self.evaluations)
        return result

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
        updates = f"{cfg.iterations - self.iteration} updates (to update {cfg.iterations})"
        line = f"plan: {updates}; {evaluations}; {cap}"
        if cfg.max_minutes > 0:
            line += (
                " (training stops early enough for the final evaluation, timed on the first; "
                "out-of-distribution splits are dropped if the evaluations would take over half the cap)"
            )
        return line

    def _estimate(self) -> str:
        """After the first update: about how long the run will take at the measured pace."""
        clock, cfg = self.clock, self.cfg
        left = cfg.iterations - self.iteration
        interval_evals = (
            left // cfg.eval.interval if cfg.eval.interval > 0 and cfg.eval.num_episodes > 0 else 0
        )
        seconds = (
            clock.elapsed_s
            + left * clock.longest_update_s
            + interval_evals * self._evaluation_s(cfg.env.split)
            + self._final_evaluation_s()
        )
        capped = f", capped at {cfg.max_minutes:g} min" if cfg.max_minutes > 0 else ""
        return (
            f"first update took {clock.longest_update_s:.1f} s: about {seconds / 60:.1f} min for "
            f"{cfg.iterations} updates with evaluations{capped}"
        )

    def anneal_exploration(self, update: int) -> dict[str, float]:
        """Move the policy's exploration to its annealed settings at ``update`` (before its rollout,
        so the rollout and its update see the same chains); returns them as metrics."""
        settings = exploration_at(self.cfg.policy, update)
        if settings:
            self.policy.set_exploration(**settings)  # type: ignore[operator]
        return exploration_metrics(settings)

    def request_stop(self) -> None:
        self._stop_requested = True

    @logs_to_run_dir
    def evaluate(self, split: str) -> EvalResult:
        return evaluate_rl_policy(self.policy, self.cfg, split)

    def _evaluate_start(self, logger: MultiLogger) -> None:
        """The evaluation before the first update: ``env.split`` first, timed; with a cap, the
        out-of-distribution splits are dropped from the run when the evaluations before and after
        on every split would take more than ``EVALUATION_SHARE`` of it, and the final evaluation is
        dropped when even ``env.split``'s two would."""
        cfg = self.cfg
        if cfg.eval.num_episodes <= 0:
            return
        self._evaluate_all(logger, splits=[cfg.env.split])
        seconds, cap_s = self._evaluation_s(cfg.env.split), cfg.max_minutes * 60.0
        if cfg.max_minutes > 0 and 2 * seconds > EVALUATION_SHARE * cap_s:
            self._final_splits = []
            log.warning(
                "an evaluation of %s took %.0f s: with max_minutes=%g there is no room for evaluations "
                "before and after, so this run ends without a final evaluation (evaluate its checkpoint "
                "with benchmarks.rl_checkpoint_eval)",
                cfg.env.split,
                seconds,
                cfg.max_minutes,
            )
            return
        if cfg.max_minutes > 0 and 2 * seconds * len(self._final_splits) > EVALUATION_SHARE * cap_s:
            log.warning(
                "an evaluation of %s took %.0f s: with max_minutes=%g this run evaluates %s only "
                "(out-of-distribution splits %s dropped)",
                cfg.env.split,
                seconds,
                cfg.max_minutes,
                cfg.env.split,
                cfg.eval.ood_splits,
            )
            self._final_splits = [cfg.env.split]
        self._evaluate_all(logger, splits=self._final_splits[1:])

    def _evaluation_s(self, split: str) -> float:
        """Seconds the last evaluation of ``split`` took (that of ``env.split`` if it had none)."""
        for wanted in (split, self.cfg.env.split):
            for entry in reversed(self.evaluations):
                if entry["split"] == wanted and "seconds" in entry:
                    return float(entry["seconds"])
        return 0.0

    def _final_evaluation_s(self) -> float:
        return sum(self._evaluation_s(split) for split in self._final_splits)

    def _unevaluated(self) -> bool:
        """No evaluation at the current iteration yet (a run stopped before its first update has
        its starting evaluation as its last)."""
        return not any(entry["iteration"] == self.iteration for entry in self.evaluations)

    def _evaluate_all(self, logger: MultiLogger, splits: list[str]) -> None:
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
            logger.log({f"eval_{split}/success_rate": evaluation.success_rate}, self.iteration)
            log.info("iteration %d: %s success %.1f %%", self.iteration, split, 100 * evaluation.success_rate)
        (self.run_dir / "evaluations.json").write_text(json.dumps(self.evaluations, indent=1))

    # ----- checkpoints ------------------------------------------------------------------------------------

    def save(self) -> Path:
        started = time.perf_counter()
        if self.clock is not None:
            self.elapsed_s = self.clock.elapsed_s
        try:
            env_state: dict[str, Any] | None = self.env.state_dict()
        except NotImplementedError:
            env_state = None
        state = {
            "iteration": self.iteration,
            "elapsed_s": self.elapsed_s,
            "env": env_state,
            "potential": self.collector.potential.clone(),
            "group_counter": self.group_counter,
            "curriculum": None if self.curriculum is None else self.curriculum.state_dict(),
            "policy_name": self.cfg.policy.name,
            "algorithm": self.algorithm.state_dict(),
            "rng": rng_state(),
            "evaluations": self.evaluations,
            "wandb_run_id": self.wandb_run_id,
        }
        self.last_checkpoint = save_checkpoint(
            self.run_dir,
            self.iteration,
            None,
            state,
            self.cfg,
            keep=self.cfg.keep_checkpoints,
            write_extra=lambda directory: self.policy.save_pretrained(directory / POLICY_DIRNAME),
        )
        self._save_s = max(self._save_s, time.perf_counter() - started)
        return self.last_checkpoint

    def _unsaved(self) -> bool:
        return self.last_checkpoint is None or self.last_checkpoint.name != f"iter_{self.iteration:06d}"

    def _find_resume_checkpoint(self) -> Checkpoint | None:
        return find_resume_checkpoint(self.cfg.resume, self.run_dir)

    def _restore(self, checkpoint: Checkpoint) -> None:
        state = checkpoint.trainer_state
        self.algorithm.load_state_dict(state["algorithm"])
        self.iteration = int(state["iteration"])
        self.elapsed_s = float(state.get("elapsed_s", 0.0))
        self.group_counter = int(state.get("group_counter", 0))
        if state.get("env") is not None:  # PPO's rollouts go on mid-episode, as if never stopped
            self.obs = self.env.load_state_dict(state["env"])
        if state.get("potential") is not None:
            self.collector.potential = state["potential"].clone()
        if self.curriculum is not None and state.get("curriculum") is not None:
            self.curriculum.load_state_dict(state["curriculum"])
        self.evaluations = list(state.get("evaluations", []))
        self.wandb_run_id = state.get("wandb_run_id")
        set_rng_state(state["rng"])
        self.last_checkpoint = checkpoint.path
        log.info("resumed from %s (iteration %d)", checkpoint.path, self.iteration)

    def _build_logger(self) -> MultiLogger:
        logger = build_logger(
            self.cfg.logger,
            self.run_dir,
            self.cfg.iterations,
            OmegaConf.to_container(OmegaConf.structured(self.cfg)),
            initial_env_steps=self.iteration,
            wandb_resume_id=self.wandb_run_id,
            unit="iteration",
        )
        self.wandb_run_id = logger.wandb_run_id or self.wandb_run_id
        return logger

    def close(self) -> None:
        self.env.close()


def rollout_metrics(stats: ChunkRolloutStats) -> dict[str, float]:
    metrics = {}
    for name, value in asdict(stats).items():
        if isinstance(value, float) and math.isnan(value):
            continue
        metrics[f"{'perf' if name.endswith('_s') else 'rollout'}/{name}"] = float(value)
    return metrics


def merge_stats(parts: list[ChunkRolloutStats]) -> ChunkRolloutStats:
    """Statistics of several rollouts of one iteration as one."""
    episodes = sum(p.episodes for p in parts)

    def weighted(name: str) -> float:
        if episodes == 0:
            return math.nan
        return sum(getattr(p, name) * p.episodes for p in parts if p.episodes) / episodes

    return ChunkRolloutStats(
        episodes=episodes,
        success_rate=weighted("success_rate"),
        mean_return=weighted("mean_return"),
        env_steps=sum(p.env_steps for p in parts),
        decisions=sum(p.decisions for p in parts),
        rollout_time_s=sum(p.rollout_time_s for p in parts),
        policy_time_s=sum(p.policy_time_s for p in parts),
        sim_time_s=sum(p.sim_time_s for p in parts),
    )
