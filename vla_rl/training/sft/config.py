"""The typed schema of a supervised fine-tuning run; ``configs/sft.yaml`` is validated against it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vla_rl.config.schema import RunConfig
from vla_rl.policies.import_settings import ImportSettings


@dataclass
class SFTDataConfig:
    path: str | None = None
    """Dataset root (LeRobot layout written by ``vla_rl.data``)."""
    max_episodes: int = 0
    """Demonstration budget: train on the first K episodes of the dataset; ``<= 0`` uses all."""
    action_key: str = "action"
    """Which per-frame column the policy learns to predict: ``action`` (what was executed) or
    ``expert_action`` (the clean expert label ``collect`` records when it adds action noise)."""
    set_action_statistics: bool = True
    """Give the policy per-dimension action quantiles of the demonstrations (families with a
    ``set_action_statistics(low, high)`` method, e.g. the token VLAs' bin ranges)."""
    action_quantiles: list[float] = field(default_factory=lambda: [0.01, 0.99])
    """Lower and upper quantile of the demonstrated actions used as the statistics' range."""
    boundary_repeats: int = 1
    """Draw the decision frames (the first ``boundary_window`` steps of each episode and of each
    segment after the gripper command flips) this many times per epoch; 1 = uniform."""
    boundary_window: int = 4
    """How many steps from each segment start count as decision frames."""
    gripper_index: int = -1
    """Action dimension holding the gripper command (its sign flips mark segment starts)."""
    intervention_only: bool = False
    """Learn from the frames of recorded deployments that a person (or a rehearsal's scripted
    expert) commanded, and only from them (HG-DAgger): samples start on frames whose
    ``intervention`` column is True, and a chunk's steps from the first frame the policy drove again
    are masked from the loss like padding past an episode's end. Needs the ``intervention`` column
    ``vla-rl deploy recording.enabled=true`` writes (``vla_rl.training.sft.interventions``)."""
    intervention_repeats: int = 1
    """Train on every frame and draw each intervention frame this many times per epoch (the
    corrections weighted against the policy's own frames; multiplies ``boundary_repeats``). With
    ``intervention_only`` the policy's frames stay out and the intervention frames are drawn this many
    times against those of ``demonstrations``. 1: no extra weight; > 1 needs the ``intervention``
    column."""
    demonstrations: str | None = None
    """A second dataset root, of demonstrations, trained on together with ``data.path`` (all its
    episodes, read after those of ``data.path``; ``max_episodes`` limits ``data.path`` only):
    HG-DAgger's aggregate is the original demonstrations plus every takeover recorded so far. Every
    frame of a demonstration is a label (the expert drove all of it): it needs no ``intervention``
    column, is a target under ``intervention_only`` and is drawn once under
    ``intervention_repeats``. None: ``data.path`` alone."""


@dataclass
class SFTPolicyConfig(ImportSettings):
    """The chunk policy to train; the maps (``action_map``, ``state_map``, ``camera_map``) fit an
    ``init_from`` LeRobot checkpoint to the demonstrations and the env (``vla_rl.policies.env_maps``)."""

    name: str = "flow_mlp"
    """Chunk-policy family of ``vla_rl.policies.registry.POLICIES`` (``token_vla``, ``chunk_vla``,
    ``pi0``, ``flow_mlp``, ``gaussian``) or your own ``ChunkPolicy`` as ``package.module:Class``."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword values of the family's ``build`` (chunk_len, action_dim, sizes, local pretrained dirs),
    typed per family and checked when the config is validated (an unknown key or a bad value is a
    ``ConfigError`` naming ``policy.kwargs.<key>``): ``TokenVLABuildSettings`` (``token_vla``,
    ``chunk_vla``), ``Pi0BuildSettings`` (``pi0``), ``SmolVLABuildSettings`` (``smolvla``),
    ``FlowMLPBuildSettings`` (``flow_mlp``),
    ``GaussianChunkBuildSettings`` (``gaussian``); see ``vla_rl.training.sft.policy_settings``."""
    init_from: str | None = None
    """Start from a saved policy instead of ``build``: a folder written by the family's
    ``save_pretrained``, a checkpoint folder, or a run folder (its latest checkpoint), e.g. to train
    an SFT run further; for ``pi0`` / ``pi05`` also a LeRobot policy folder or an openpi PyTorch export."""


@dataclass
class SFTOptimConfig:
    learning_rate: float = 1e-4
    """Peak AdamW learning rate (reached at the end of the warmup)."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """AdamW moment decay rates (beta1, beta2)."""
    warmup_steps: int = 0
    """Optimizer steps of linear warmup from 0 to ``learning_rate``."""
    min_lr_ratio: float = 0.0
    """The cosine decay ends at ``min_lr_ratio * learning_rate`` after ``steps`` optimizer steps."""
    grad_clip_norm: float = 1.0
    """Clip the global gradient L2 norm to this; ``<= 0`` disables."""
    grad_accum_steps: int = 1
    """Minibatches whose gradients are averaged into one optimizer step."""


@dataclass
class SFTEvalConfig:
    interval: int = 0
    """Evaluate in the simulator every this many optimizer steps; ``<= 0`` only at the end."""
    num_episodes: int = 16
    """Episodes per evaluation; ``<= 0`` disables evaluation."""
    execute_steps: int = 0
    """Actions of each predicted chunk executed before re-planning; ``<= 0`` executes the whole chunk."""
    ensemble_decay: float | None = None
    """Temporal ensembling (ACT): re-plan at every step and execute the mean of all chunks'
    predictions for that step, a prediction made ``age`` steps earlier weighted
    ``exp(ensemble_decay * age)``; None: execute ``execute_steps`` actions per chunk."""
    deterministic: bool = True
    """Greedy / noise-free chunks instead of samples."""
    temperature: float = 1.0
    """Sampling temperature when not ``deterministic``."""
    video: bool = False
    """Write an mp4 of the final evaluation."""
    video_envs: int = 4
    """Worlds recorded side by side in the video."""
    video_camera: str = "front"
    """Camera rendered for the video."""


@dataclass
class SFTConfig(RunConfig):
    """``vla-rl sft``: supervised fine-tuning of a chunk policy on demonstrations (``configs/sft.yaml``)."""

    # RunConfig's settings with this config's defaults (documented there):
    job: str = "sft"
    run_dir: str = "runs/sft"
    checkpoint_interval: int = 500
    keep_checkpoints: int = 2
    data: SFTDataConfig = field(default_factory=SFTDataConfig)
    """Demonstrations."""
    policy: SFTPolicyConfig = field(default_factory=SFTPolicyConfig)
    """Chunk policy family and its construction values."""
    optim: SFTOptimConfig = field(default_factory=SFTOptimConfig)
    """AdamW, learning-rate schedule, clipping, accumulation."""
    eval: SFTEvalConfig = field(default_factory=SFTEvalConfig)
    """Evaluation in the simulator."""
    steps: int = 1000
    """Optimizer steps to train for."""
    batch_size: int = 32
    """Samples per minibatch (per accumulation step)."""
    device: str = "cpu"
    """Torch device of the policy and the batches."""
