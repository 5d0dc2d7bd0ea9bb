"""Metric sinks for training: console progress bar, TensorBoard and Weights & Biases.

Heavy or optional libraries (tensorboard, wandb) are imported only when their sink is enabled.
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vla_rl.config.schema import LoggerConfig


class MetricSink(ABC):
    """Receives scalar metrics keyed by ``"group/name"`` at a global env-step count."""

    @abstractmethod
    def log(self, metrics: Mapping[str, float], env_steps: int) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Flush and release resources."""


class ConsoleSink(MetricSink):
    """The training phase's bar over env steps (or the ``unit`` the trainer counts in) with env steps/s
    and success rate in the postfix. A trainer that logs no ``perf/env_steps_per_s`` but its
    ``rollout/env_steps`` per iteration gets them over the wall time since the bar opened."""

    def __init__(self, total_env_steps: int, initial_env_steps: int = 0, unit: str = "step") -> None:
        from vla_rl.training.progress import phase_bar

        # Env steps run into the millions: k/M prefixes; iterations are shown as counted.
        scale = unit == "step"
        self._bar = phase_bar("training", total_env_steps, unit, initial=initial_env_steps, scale=scale)
        self._last_steps = initial_env_steps
        self._opened_s = time.perf_counter()
        self._rollout_env_steps = 0.0

    def log(self, metrics: Mapping[str, float], env_steps: int) -> None:
        self._bar.update(max(env_steps - self._last_steps, 0))
        self._last_steps = env_steps
        self._rollout_env_steps += metrics.get("rollout/env_steps", 0.0)
        if "perf/env_steps_per_s" not in metrics and self._rollout_env_steps > 0:
            elapsed_s = max(time.perf_counter() - self._opened_s, 1e-9)
            metrics = {**metrics, "perf/env_steps_per_s": self._rollout_env_steps / elapsed_s}
        postfix = {}
        for key, label, fmt in _CONSOLE_FIELDS:
            if key in metrics:
                postfix[label] = format(metrics[key], fmt)
        self._bar.set_postfix(postfix, refresh=True)

    def close(self) -> None:
        self._bar.close()


_CONSOLE_FIELDS = [
    ("perf/env_steps_per_s", "sps", ".0f"),
    ("rollout/success_rate", "success", ".2f"),
    ("rollout/mean_return", "return", ".2f"),
    ("train/learning_rate", "lr", ".1e"),
    ("train/loss", "loss", ".4f"),
    ("eval/success_rate", "eval_success", ".2f"),
]


class TensorBoardSink(MetricSink):
    """Scalars under ``log_dir``. ``purge_step`` (a resumed run's first step after its checkpoint)
    tells TensorBoard to drop what an interrupted run logged at that step and later, so the steps
    done again appear once."""

    def __init__(self, log_dir: Path, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def log(self, metrics: Mapping[str, float], env_steps: int) -> None:
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, env_steps)

    def close(self) -> None:
        self._writer.close()


class WandbSink(MetricSink):
    def __init__(
        self, cfg: LoggerConfig, run_dir: Path, config: dict[str, Any], resume_id: str | None
    ) -> None:
        import wandb

        self._run = wandb.init(
            mode=cfg.wandb_mode,
            project=cfg.wandb_project,
            entity=cfg.wandb_entity,
            group=cfg.wandb_group,
            dir=str(run_dir),
            config=config,
            id=resume_id,
            resume="allow" if resume_id else None,
            reinit=True,
        )

    @property
    def run_id(self) -> str:
        return str(self._run.id)

    def log(self, metrics: Mapping[str, float], env_steps: int) -> None:
        self._run.log(dict(metrics), step=env_steps)

    def close(self) -> None:
        self._run.finish()


class MultiLogger(MetricSink):
    """Fans metrics out to every enabled sink."""

    def __init__(self, sinks: list[MetricSink]) -> None:
        self.sinks = sinks

    def log(self, metrics: Mapping[str, float], env_steps: int) -> None:
        for sink in self.sinks:
            sink.log(metrics, env_steps)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()

    @property
    def wandb_run_id(self) -> str | None:
        for sink in self.sinks:
            if isinstance(sink, WandbSink):
                return sink.run_id
        return None


def build_logger(
    cfg: LoggerConfig,
    run_dir: Path,
    total_env_steps: int,
    config: dict[str, Any],
    initial_env_steps: int = 0,
    wandb_resume_id: str | None = None,
    unit: str = "step",
) -> MultiLogger:
    """Sinks chosen by ``cfg``; W&B and TensorBoard write under ``run_dir``. ``unit``: what the
    console bar counts (``total_env_steps`` of them)."""
    sinks: list[MetricSink] = []
    if cfg.progress_bar:
        sinks.append(ConsoleSink(total_env_steps, initial_env_steps, unit))
    if cfg.tensorboard:
        purge_step = initial_env_steps + 1 if initial_env_steps > 0 else None
        sinks.append(TensorBoardSink(run_dir / "tensorboard", purge_step))
    if cfg.wandb_mode != "disabled":
        os.environ.setdefault("WANDB_SILENT", "true")
        sinks.append(WandbSink(cfg, run_dir, config, wandb_resume_id))
    return MultiLogger(sinks)
