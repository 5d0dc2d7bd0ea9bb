"""Typed configuration of ``vla-rl collect`` (``configs/collect.yaml``) and its validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from vla_rl.config.structured import (
    Check,
    ConfigError,
    compose_config_module,
    nested,
    not_negative,
    positive,
    validate_structured,
)
from vla_rl.data.lerobot_format import (
    DATASET_WRITERS,
    DEFAULT_CODEBASE_VERSION,
    DEFAULT_FINALIZE_EVERY_EPISODES,
)
from vla_rl.data.video import LOSSLESS_VIDEO, VideoSettings
from vla_rl.envs.config import ENV_CHECKS, EnvConfig

COLLECT_CONFIG_NAME = "collect"
EXPERT_BACKENDS = ("mujoco", "libero")
"""Backends with a scripted expert ``vla-rl collect`` runs (``vla_rl.data.collect.EXPERT_RECORDINGS``)."""
LIBERO_EXPERT_SUITES = ("libero_spatial", "libero_object")
"""LIBERO suites whose goals the scripted pick-and-place expert reaches (``vla_rl.sims.libero.expert``)."""


@dataclass
class CollectVideoConfig:
    """How camera frames are encoded into the dataset's mp4 files."""

    codec: str = "libx264"
    """ffmpeg encoder (``libx264`` H.264, ``libx264rgb``, ``libsvtav1`` AV1 ...)."""
    pix_fmt: str = "yuv420p"
    """Encoded pixel format (``yuv420p`` plays everywhere; ``rgb24`` with ``libx264rgb`` is exact)."""
    crf: int = 23
    """Constant rate factor: 0 is lossless for x264, higher is smaller and lossier."""
    preset: str = ""
    """Encoder speed preset (``ultrafast`` ... ``veryslow``); empty uses the encoder default."""
    keyframe_interval: int = 0
    """Frames from one keyframe to the next (ffmpeg's ``-g``); 0: the encoder's default (x264: up to 250).
    Small values (LeRobot uses 2) make seeking a frame fast, as training on the dataset does, at the
    cost of larger files."""
    lossless: bool = False
    """Ignore codec, pix_fmt, crf and preset and store bit-exact RGB (``libx264rgb``, ``rgb24``, crf 0)."""

    def settings(self) -> VideoSettings:
        if self.lossless:
            return dataclasses.replace(LOSSLESS_VIDEO, keyframe_interval=self.keyframe_interval)
        return VideoSettings(
            codec=self.codec,
            pix_fmt=self.pix_fmt,
            crf=self.crf,
            preset=self.preset,
            keyframe_interval=self.keyframe_interval,
        )


def _default_env() -> EnvConfig:
    return EnvConfig(task="pick_place", num_envs=25, cameras=["front"], image_size=64, num_threads=1)


@dataclass
class CollectConfig:
    """Record scripted-expert demonstrations in the batched MuJoCo env into a LeRobot dataset."""

    env: EnvConfig = field(default_factory=_default_env)
    """Simulator, task, split, cameras and image size the demonstrations are recorded in."""
    num_episodes: int = 100
    """Episodes written to the dataset (successful ones only unless ``keep_failures``)."""
    max_attempts: int = 0
    """Give up after this many finished episodes; ``<= 0`` allows ``10 * num_episodes``."""
    keep_failures: bool = False
    """Also write failed episodes (labelled ``success: false`` in ``meta/episodes.jsonl``)."""
    noise_std: float = 0.0
    """Std of Gaussian noise added to the expert's xyz actions (normalised units) for diverse demos."""
    policy_checkpoint: str = ""
    """Record the rollouts of this ``vla-rl train`` run or checkpoint's policy instead of the
    scripted expert (``noise_std`` and the expert-action column do not apply); set
    ``keep_failures=true`` to keep the episodes it fails."""
    policy_deterministic: bool = False
    """Act with the policy's mean action instead of sampling it."""
    record_expert_actions: bool = True
    """With noise, also store the clean expert action of every frame as the ``expert_action`` column."""
    record_privileged: bool = True
    """Store ``obs['privileged']`` as the ``observation.privileged`` column."""
    seed: int = 0
    """Seed of the env's initial states and of the expert's noise."""
    output_dir: str = "datasets/${env.task}_${env.split}"
    """Dataset directory to create."""
    codebase_version: str = DEFAULT_CODEBASE_VERSION
    """LeRobot dataset version written: ``v3.0`` (LeRobot 0.4's format: many episodes per parquet and mp4
    file) or ``v2.1`` (one parquet and one mp4 per episode); appending needs the existing dataset's."""
    finalize_every_episodes: int = DEFAULT_FINALIZE_EVERY_EPISODES
    """v3.0: finish the open data and video files and rewrite the meta files every this many episodes
    (each finalise starts new files; a crash loses at most the episodes since the last one); 0: only
    when a file reaches its size cap and at the end. v2.1 finishes every episode as it is written."""
    append: bool = False
    """Add episodes to an existing dataset at ``output_dir`` instead of refusing to touch it (give a new
    ``seed``, or the added episodes repeat the first ones)."""
    robot_type: str = "panda"
    """``robot_type`` recorded in ``meta/info.json``."""
    video: CollectVideoConfig = field(default_factory=CollectVideoConfig)
    """Camera video encoding."""
    torch_num_threads: int = 1
    """``torch.set_num_threads`` for the collection process."""


COLLECT_CHECKS: tuple[Check[CollectConfig], ...] = (
    Check(
        "env.backend",
        lambda c: c.env.backend in EXPERT_BACKENDS,
        f"scripted experts run in {', '.join(EXPERT_BACKENDS)} "
        "(MetaWorld's: python -m vla_rl.data.metaworld_collect)",
    ),
    Check(
        "env.control_mode",
        lambda c: c.env.backend != "mujoco" or c.env.control_mode == "ee_delta_pos",
        "the built-in tasks' scripted experts act in 'ee_delta_pos'",
    ),
    *nested("env", ENV_CHECKS),
    *positive("num_episodes", "torch_num_threads"),
    *not_negative("noise_std", "video.crf", "video.keyframe_interval", "finalize_every_episodes"),
    Check("output_dir", lambda c: bool(c.output_dir), "must name the dataset directory"),
    Check(
        "codebase_version",
        lambda c: c.codebase_version in DATASET_WRITERS,
        f"must be one of {', '.join(DATASET_WRITERS)}",
    ),
)


def validate_collect_config(raw: DictConfig | dict[str, Any]) -> CollectConfig:
    """Merge ``raw`` into ``CollectConfig`` (unknown keys and wrong types fail) and check values."""
    config = validate_structured(CollectConfig, raw, COLLECT_CHECKS)
    if config.policy_checkpoint:
        return config
    if config.env.backend == "libero":
        suite = config.env.task.partition("/")[0]
        if suite not in LIBERO_EXPERT_SUITES:
            raise ConfigError(
                f"config key 'env.task': the scripted LIBERO expert picks and places in "
                f"{', '.join(LIBERO_EXPERT_SUITES)}, not {config.env.task!r}"
            )
        return config
    from vla_rl.sims.tasks.scripted import SCRIPTED_POLICIES

    if config.env.task not in SCRIPTED_POLICIES:
        known = sorted(SCRIPTED_POLICIES)
        raise ConfigError(
            f"config key 'env.task': no scripted expert for {config.env.task!r} (known: {known})"
        )
    return config


def compose_collect_config(overrides: Sequence[str] = ()) -> CollectConfig:
    """``configs/collect.yaml`` plus Hydra-syntax ``overrides`` (``env=push num_episodes=50``), validated."""
    return validate_collect_config(compose_config_module(COLLECT_CONFIG_NAME, overrides))
