"""Supervised fine-tuning of a chunk policy on demonstrations: sample -> loss -> AdamW step -> log.

A checkpoint (``<run_dir>/checkpoints/iter_XXXXXX``) holds the policy as its own ``save_pretrained``
folder (``policy/``, loadable with ``load_chunk_policy``), the optimizer, the learning-rate
schedule, the minibatch sampler and every global RNG state, and the resolved config; a resumed run
therefore computes the same losses as one that never stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.envs.base import Observation
from vla_rl.envs.batching import obs_to_device
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.registry import build_chunk_policy, chunk_policy_class, load_chunk_policy
from vla_rl.training.checkpoint import (
    POLICY_DIRNAME,
    Checkpoint,
    find_resume_checkpoint,
    resolve_policy_dir,
    save_checkpoint,
)
from vla_rl.training.evaluate import EvalResult
from vla_rl.training.loggers import MultiLogger, build_logger
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.run_record import record_run_start
from vla_rl.training.seeding import rng_state, seed_everything, set_rng_state
from vla_rl.training.sft.chunk_sampler import ChunkSampler
from vla_rl.training.sft.config import SFTConfig
from vla_rl.training.sft.demonstrations import (
    action_quantiles,
    load_demonstrations,
    take_episodes,
    with_action_labels,
)
from vla_rl.training.sft.evaluate_chunks import evaluate_chunk_policy
from vla_rl.training.sft.lr_schedule import warmup_cosine_factor
from vla_rl.training.stop_signals import install_stop_handlers

log = logging.getLogger(__name__)

"""Folder inside each checkpoint holding the policy's ``save_pretrained`` output."""
EVAL_SEED_OFFSET = 1_000_003
NORMALIZER_BATCH = 1024


@dataclass
class SFTResult:
    steps: int
    """Optimizer steps completed in total (including those before a resume)."""
    wall_time_s: float
    """Wall time of this ``train`` call."""
    stop_reason: str
    """``steps`` (budget reached) or ``interrupted``."""
    last_checkpoint: Path | None
    """The checkpoint written last."""
    history: list[dict[str, float]] = field(default_factory=list)
    """Training metrics of every optimizer step of this call, in order."""
    evaluations: list[tuple[int, EvalResult]] = field(default_factory=list)
    """(step, result) of the periodic evaluations of this call."""
    final_eval: EvalResult | None = None
    """Evaluation after the last step (None when interrupted or ``eval.num_episodes <= 0``)."""


class SFTTrainer:
    """Builds the policy, data, optimizer and schedule from an ``SFTConfig`` (resuming if asked).

    ``episodes`` replaces reading ``cfg.data.path`` (any iterable of ``Episode``; the first
    ``cfg.data.max_episodes`` are used).
    """

    @logs_to_run_dir
    def __init__(self, cfg: SFTConfig, episodes: Iterable[Episode] | None = None) -> None:
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        self.device = torch.device(cfg.device)
        torch.set_num_threads(cfg.torch_num_threads)
        seed_everything(cfg.seed)
        if episodes is None:
            self.episodes = load_demonstrations(cfg.data.path, cfg.data.max_episodes)
        else:
            self.episodes = take_episodes(episodes, cfg.data.max_episodes)
        self.episodes = with_action_labels(self.episodes, cfg.data.action_key)
        checkpoint = self._find_resume_checkpoint()
        self.policy = self._make_policy(checkpoint).to(self.device)
        data_action_dim = self.episodes[0].actions.shape[-1]
        if data_action_dim != self.policy.action_dim:
            raise ConfigError(
                f"config key 'policy.kwargs.action_dim': the demonstrations have {data_action_dim}-"
                f"dimensional actions, policy {cfg.policy.name!r} predicts {self.policy.action_dim}"
            )
        self.sampler = ChunkSampler(
            self.episodes,
            self.policy.chunk_len,
            cfg.batch_size,
            cfg.seed,
            self._obs_transform(),
            boundary_repeats=cfg.data.boundary_repeats,
            boundary_window=cfg.data.boundary_window,
            gripper_index=cfg.data.gripper_index,
        )
        self.parameters = [p for p in self.policy.parameters() if p.requires_grad]
        if not self.parameters:
            raise ValueError(f"policy {cfg.policy.name!r} has no trainable parameters")
        self.optimizer = torch.optim.AdamW(
            self.parameters,
            lr=cfg.optim.learning_rate,
            betas=(cfg.optim.betas[0], cfg.optim.betas[1]),
            weight_decay=cfg.optim.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.step = 0
        self.wandb_run_id: str | None = None
        self.last_checkpoint: Path | None = None
        self._stop_requested = False
        if checkpoint is not None:
            self._restore(checkpoint)

    # ------------------------------------------------------------------ training
    def train_step(self) -> dict[str, float]:
        """One optimizer step over ``grad_accum_steps`` minibatches; returns its metrics."""
        ocfg = self.cfg.optim
        self.policy.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        for _ in range(ocfg.grad_accum_steps):
            batch = self.sampler.next_batch()
            output = self.policy.sft_loss(
                obs_to_device(batch.obs, self.device),
                batch.action_chunk.to(self.device),
                batch.chunk_mask.to(self.device),
            )
            (output.loss / ocfg.grad_accum_steps).backward()
            for name, value in {"loss": float(output.loss.detach()), **output.metrics}.items():
                sums[name] = sums.get(name, 0.0) + float(value) / ocfg.grad_accum_steps
        max_norm = ocfg.grad_clip_norm if ocfg.grad_clip_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.parameters, max_norm)
        learning_rate = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.step += 1
        metrics = {f"train/{name}": value for name, value in sums.items()}
        metrics["train/grad_norm"] = float(grad_norm)
        metrics["train/learning_rate"] = float(learning_rate)
        metrics["train/epoch"] = float(self.sampler.epoch)
        return metrics

    @logs_to_run_dir
    def train(self) -> SFTResult:
        """Train until ``cfg.steps`` optimizer steps (or a stop request), evaluating and
        checkpointing on the configured intervals, then checkpoint and run the final evaluation."""
        cfg = self.cfg
        record_run_start(self.run_dir, cfg)
        logger = self._build_logger()
        start = time.perf_counter()
        result = SFTResult(steps=self.step, wall_time_s=0.0, stop_reason="steps", last_checkpoint=None)
        restore_signals = self._install_signal_handlers()
        try:
            while self.step < cfg.steps:
                if self._stop_requested:
                    result.stop_reason = "interrupted"
                    break
                t0 = time.perf_counter()
                metrics = self.train_step()
                metrics["perf/step_time_s"] = time.perf_counter() - t0
                result.history.append(metrics)
                if self.step % cfg.logger.log_interval == 0:
                    logger.log(metrics, self.step)
                if self._periodic_eval_due():
                    evaluation = self.evaluate()
                    result.evaluations.append((self.step, evaluation))
                    logger.log(eval_metrics(evaluation), self.step)
                if self.step % cfg.checkpoint_interval == 0:
                    self.save()
            restore_signals()
            if self.step > 0 and self._unsaved():
                self.save()
            if result.stop_reason == "steps" and cfg.eval.num_episodes > 0:
                result.final_eval = self.evaluate(video=cfg.eval.video)
                logger.log(eval_metrics(result.final_eval), self.step)
        finally:
            restore_signals()
            if self.step > 0 and self._unsaved():
                self.save()
            logger.close()
        result.steps = self.step
        result.wall_time_s = time.perf_counter() - start
        result.last_checkpoint = self.last_checkpoint
        return result

    def request_stop(self) -> None:
        """Finish the current optimizer step, write a checkpoint and return from ``train``."""
        self._stop_requested = True

    @logs_to_run_dir
    def evaluate(self, video: bool = False) -> EvalResult:
        """Success rate of the current policy in the simulator as ``cfg.eval`` says."""
        ecfg = self.cfg.eval
        out_dir = self.run_dir / "eval"
        return evaluate_chunk_policy(
            self.policy,
            self.cfg.env,
            ecfg.num_episodes,
            ecfg.execute_steps,
            seed=self.cfg.seed + EVAL_SEED_OFFSET,
            video_dir=out_dir if video else None,
            deterministic=ecfg.deterministic,
            temperature=ecfg.temperature,
            video_envs=ecfg.video_envs,
            video_camera=ecfg.video_camera,
            summary_path=out_dir / f"eval_step_{self.step:06d}.json",
            ensemble_decay=ecfg.ensemble_decay,
        )

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything that changes during training except the policy weights."""
        return {
            "step": self.step,
            "policy_name": self.cfg.policy.name,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": {k: v for k, v in self.scheduler.state_dict().items() if k != "lr_lambdas"},
            "sampler": self.sampler.state_dict(),
            "rng": rng_state(),
            "wandb_run_id": self.wandb_run_id,
        }

    def save(self) -> Path:
        self.last_checkpoint = save_checkpoint(
            self.run_dir,
            self.step,
            None,
            self.state_dict(),
            self.cfg,
            keep=self.cfg.keep_checkpoints,
            write_extra=lambda directory: self.policy.save_pretrained(directory / POLICY_DIRNAME),
        )
        return self.last_checkpoint

    def _unsaved(self) -> bool:
        return self.last_checkpoint is None or self.last_checkpoint.name != f"iter_{self.step:06d}"

    def _find_resume_checkpoint(self) -> Checkpoint | None:
        return find_resume_checkpoint(self.cfg.resume, self.run_dir)

    def _make_policy(self, checkpoint: Checkpoint | None) -> ChunkPolicy:
        pcfg = self.cfg.policy
        if checkpoint is not None:
            saved_name = checkpoint.trainer_state.get("policy_name", pcfg.name)
            if saved_name != pcfg.name:
                raise ValueError(
                    f"checkpoint {checkpoint.path} holds a {saved_name!r} policy, config says {pcfg.name!r}"
                )
            return load_chunk_policy(pcfg.name, checkpoint.path / POLICY_DIRNAME)
        if pcfg.init_from:
            return chunk_policy_class(pcfg.name).from_pretrained(resolve_policy_dir(pcfg.init_from))
        policy = build_chunk_policy(pcfg.name, **dict(pcfg.kwargs))
        self._fit_data_statistics(policy)
        return policy

    def _fit_data_statistics(self, policy: ChunkPolicy) -> None:
        """Give a freshly built policy the statistics of its demonstrations, where it takes them."""
        dcfg = self.cfg.data
        set_statistics: Callable[..., None] | None = getattr(policy, "set_action_statistics", None)
        if dcfg.set_action_statistics and set_statistics is not None:
            low, high = action_quantiles(self.episodes, *dcfg.action_quantiles)
            set_statistics(low, high)
        update_normalizer: Callable[..., None] | None = getattr(policy, "update_normalizer", None)
        if update_normalizer is not None:
            table = ChunkSampler(self.episodes, 1, NORMALIZER_BATCH, obs_transform=self._obs_transform())
            for begin in range(0, table.num_samples, NORMALIZER_BATCH):
                update_normalizer(
                    table.collate(range(begin, min(begin + NORMALIZER_BATCH, table.num_samples))).obs
                )

    def _obs_transform(self) -> Callable[[Observation], Observation] | None:
        """Derived observation keys the simulator adds but datasets do not store (``objects``)."""
        if self.cfg.env.backend != "mujoco":
            return None
        from vla_rl.sims.tasks.registry import object_state_transform

        return object_state_transform(self.cfg.env.task)

    def _restore(self, checkpoint: Checkpoint) -> None:
        state = checkpoint.trainer_state
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict({**state["scheduler"], "lr_lambdas": [None]})
        self.sampler.load_state_dict(state["sampler"])
        self.step = int(state["step"])
        self.wandb_run_id = state.get("wandb_run_id")
        set_rng_state(state["rng"])
        self.last_checkpoint = checkpoint.path
        log.info("resumed from %s (step %d)", checkpoint.path, self.step)

    # ---------------------------------------------------------------- helpers
    def _lr_factor(self, step: int) -> float:
        ocfg = self.cfg.optim
        return warmup_cosine_factor(step, self.cfg.steps, ocfg.warmup_steps, ocfg.min_lr_ratio)

    def _periodic_eval_due(self) -> bool:
        ecfg = self.cfg.eval
        due = ecfg.interval > 0 and self.step % ecfg.interval == 0
        return due and ecfg.num_episodes > 0 and self.step < self.cfg.steps

    def _build_logger(self) -> MultiLogger:
        logger = build_logger(
            self.cfg.logger,
            self.run_dir,
            self.cfg.steps,
            OmegaConf.to_container(OmegaConf.structured(self.cfg)),
            initial_env_steps=self.step,
            wandb_resume_id=self.wandb_run_id,
        )
        self.wandb_run_id = logger.wandb_run_id or self.wandb_run_id
        return logger

    def _install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM and the first Ctrl-C stop after the current step (with a checkpoint)."""
        return install_stop_handlers(self.request_stop, lambda: self._stop_requested)


def eval_metrics(result: EvalResult) -> dict[str, float]:
    return {
        "eval/success_rate": result.success_rate,
        "eval/success_once_rate": result.success_once_rate,
        "eval/mean_return": result.mean_return,
        "eval/mean_length": result.mean_length,
    }
