"""Supervised fine-tuning of a chunk policy on demonstrations: minibatches -> ``sft`` update -> log.

``SFTTrainer`` builds the policy, the demonstrations' minibatch source (``DemoBatches``) and the
``sft`` algorithm (the policy's loss, AdamW, warm-up and cosine schedule) and hands them to the one
loop (``vla_rl.training.loop``). A checkpoint (``<run_dir>/checkpoints/iter_XXXXXX``) holds the
policy as its own ``save_pretrained`` folder (``policy/``, loadable with ``load_chunk_policy``), the
optimizer, the learning-rate schedule, the minibatch sampler and every global RNG state, and the
resolved config; a resumed run therefore computes the same losses as one that never stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from vla_rl.algorithms.registry import algorithm_class
from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.env_maps import EnvInterface
from vla_rl.policies.registry import build_chunk_policy, load_chunk_policy
from vla_rl.registry import resolve
from vla_rl.training.checkpoint import POLICY_DIRNAME, Checkpoint, resolve_policy_dir
from vla_rl.training.env_fit import apply_env_maps
from vla_rl.training.evaluate import EvalResult, evaluate_run
from vla_rl.training.loop import Run, RunResult, TrainingLoop
from vla_rl.training.progress import logs_to_run_dir
from vla_rl.training.sft.chunk_sampler import ChunkSampler
from vla_rl.training.sft.config import SFTConfig
from vla_rl.training.sft.demonstrations import (
    action_quantiles,
    load_demonstrations,
    take_episodes,
    with_action_labels,
)
from vla_rl.training.sft.interventions import select_frames
from vla_rl.training.sources import DemoBatches

NORMALIZER_BATCH = 1024
DERIVED_OBSERVATIONS = {
    "mujoco": "vla_rl.sims.tasks.registry:object_state_transform",
    "metaworld": "vla_rl.sims.metaworld.tasks:task_onehot_transform",
}
"""Backend -> factory (called with ``env.task``) of the function that adds to a recorded observation
the keys its simulator derives but datasets do not store (``objects``, ``task_onehot``); None: none."""


@dataclass
class SFTResult(RunResult):
    """``RunResult`` (its updates are optimizer steps, ``steps``; ``stop_reason``: ``steps`` or
    ``interrupted``) and the evaluations."""

    evaluations: list[tuple[int, EvalResult]] = field(default_factory=list)
    """(step, result) of the periodic evaluations of this call."""
    final_eval: EvalResult | None = None
    """Evaluation after the last step (None when interrupted or ``eval.num_episodes <= 0``)."""

    @property
    def steps(self) -> int:
        """Optimizer steps completed in total (including those before a resume)."""
        return self.iterations


class SFTTrainer(TrainingLoop):
    """Builds the policy, data, the ``sft`` algorithm (loss, AdamW, schedule) and its minibatch
    source from an ``SFTConfig`` (resuming if asked) and trains them in the one loop; each iteration
    (``run_iteration``) is one optimizer step over ``grad_accum_steps`` minibatches.

    ``episodes`` replaces reading ``cfg.data.path`` (any iterable of ``Episode``; the first
    ``cfg.data.max_episodes`` are used).
    """

    budget_reason = "steps"
    log_unit = "step"
    result_type = SFTResult

    @logs_to_run_dir
    def __init__(self, cfg: SFTConfig, episodes: Iterable[Episode] | None = None) -> None:
        self.begin(cfg)
        self.device = torch.device(cfg.device)
        if episodes is None:
            self.episodes = load_demonstrations(cfg.data.path, cfg.data.max_episodes)
        else:
            self.episodes = take_episodes(episodes, cfg.data.max_episodes)
        demonstrations = []
        if cfg.data.demonstrations:
            demonstrations = load_demonstrations(cfg.data.demonstrations, key="data.demonstrations")
        self.frames = select_frames(self.episodes, cfg.data, demonstrations)
        self.episodes = with_action_labels([*self.episodes, *demonstrations], cfg.data.action_key)
        checkpoint = self._find_resume_checkpoint()
        self.policy = self._make_policy(checkpoint).to(self.device)
        data_action_dim = self.episodes[0].actions.shape[-1]
        self._check_demonstrations_fit(data_action_dim)
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
            labelled=self.frames.labelled,
            frame_repeats=self.frames.frame_repeats,
        )
        self.source = DemoBatches(self.sampler, cfg.optim.grad_accum_steps)
        self.algorithm = algorithm_class("sft")(self.policy, cfg.optim, cfg.steps, self.device)
        self.resume(checkpoint)

    @property
    def step(self) -> int:
        """Optimizer steps done (the loop's ``iteration``)."""
        return self.iteration

    # ----- the loop's hooks -------------------------------------------------------------------------------

    def advance(self, metrics: dict[str, float], batch_s: float, update_s: float) -> dict[str, float]:
        metrics["perf/step_time_s"] = batch_s + update_s
        return metrics

    def after_update(self, last: bool, run: Run) -> None:
        ecfg = self.cfg.eval
        if ecfg.interval > 0 and self.step % ecfg.interval == 0 and ecfg.num_episodes > 0 and not last:
            evaluation = self.evaluate()
            self.evaluations.append((self.step, evaluation))
            self.logger.log(eval_metrics(evaluation), self.step)

    def before_training(self) -> None:
        self.evaluations: list[tuple[int, EvalResult]] = []
        self.final_eval: EvalResult | None = None

    def finish(self, run: Run) -> None:
        """Checkpoint, then evaluate (unless interrupted)."""
        if self.step > 0 and self.unsaved():
            self.save()
        if run.stop_reason == "steps" and self.cfg.eval.num_episodes > 0:
            self.final_eval = self.evaluate(video=self.cfg.eval.video)
            self.logger.log(eval_metrics(self.final_eval), self.step)

    def extra_state(self) -> dict[str, Any]:
        return {"step": self.step, "policy_name": self.cfg.policy.name, **self.source.state_dict()}

    def upgrade_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Checkpoints before the one loop: ``step`` for ``iteration``, the optimizer and the
        schedule outside ``algorithm``."""
        if "algorithm" in state:
            return state
        algorithm = {"optimizer": state["optimizer"], "scheduler": state["scheduler"]}
        return {**state, "iteration": state["step"], "algorithm": algorithm}

    @logs_to_run_dir
    def evaluate(self, video: bool = False) -> EvalResult:
        """Success rate of the current policy in the simulator as ``cfg.eval`` says."""
        summary_name = f"eval_step_{self.step:06d}.json"
        return evaluate_run(self.policy, self.cfg, self.run_dir / "eval", video, summary_name)

    def _make_policy(self, checkpoint: Checkpoint | None) -> ChunkPolicy:
        pcfg = self.cfg.policy
        if checkpoint is not None:
            saved_name = checkpoint.trainer_state.get("policy_name", pcfg.name)
            if saved_name != pcfg.name:
                raise ValueError(
                    f"checkpoint {checkpoint.path} holds a {saved_name!r} policy, config says {pcfg.name!r}"
                )
            return load_chunk_policy(
                pcfg.name, checkpoint.path / POLICY_DIRNAME, trust_remote_code=pcfg.trust_remote_code
            )
        if pcfg.init_from:
            policy = load_chunk_policy(
                pcfg.name,
                resolve_policy_dir(pcfg.init_from),
                pcfg.tokenizer_dir,
                openpi_asset_id=pcfg.openpi_asset_id,
                openpi_delta_action_mask=pcfg.openpi_delta_action_mask,
                unnorm_key=pcfg.unnorm_key,
                trust_remote_code=pcfg.trust_remote_code,
            )
            apply_env_maps(policy, pcfg, pcfg.name)
            return policy
        policy = build_chunk_policy(pcfg.name, **dict(pcfg.kwargs))
        self._fit_data_statistics(policy)
        return policy

    def _check_demonstrations_fit(self, action_dim: int) -> None:
        """``policy.check_env`` against the demonstrations (their actions, vectors and cameras, with
        the derived keys the simulator adds): an imported checkpoint must meet them through its maps."""
        table = ChunkSampler(self.episodes[:1], 1, 1, obs_transform=self._obs_transform())
        obs = table.collate([0]).obs
        self.policy.check_env(EnvInterface.of_observation(obs, action_dim, "the demonstrations"))

    def _fit_data_statistics(self, policy: ChunkPolicy) -> None:
        """Give a freshly built policy the statistics of its demonstrations, where it takes them."""
        dcfg = self.cfg.data
        set_statistics: Callable[..., None] | None = getattr(policy, "set_action_statistics", None)
        if dcfg.set_action_statistics and set_statistics is not None:
            low, high = action_quantiles(self.episodes, *dcfg.action_quantiles, self.frames.labelled)
            set_statistics(low, high)
        update_normalizer: Callable[..., None] | None = getattr(policy, "update_normalizer", None)
        if update_normalizer is not None:
            table = ChunkSampler(self.episodes, 1, NORMALIZER_BATCH, obs_transform=self._obs_transform())
            for begin in range(0, table.num_samples, NORMALIZER_BATCH):
                update_normalizer(
                    table.collate(range(begin, min(begin + NORMALIZER_BATCH, table.num_samples))).obs
                )

    def _obs_transform(self) -> Callable[[Observation], Observation] | None:
        """Observation keys the simulator derives but datasets do not store (``DERIVED_OBSERVATIONS``)."""
        backend = self.cfg.env.backend
        if backend not in DERIVED_OBSERVATIONS:
            return None
        return resolve(DERIVED_OBSERVATIONS, backend, "derived-observation transform")(self.cfg.env.task)


def eval_metrics(result: EvalResult) -> dict[str, float]:
    names = ("success_rate", "success_once_rate", "mean_return", "mean_length")
    return {f"eval/{name}": getattr(result, name) for name in names}
