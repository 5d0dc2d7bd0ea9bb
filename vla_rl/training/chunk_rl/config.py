"""The typed schema of an RL fine-tuning run of a chunk policy (``configs/rl.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vla_rl.algorithms.chunk_config import ChunkRLConfig
from vla_rl.config.schema import LoggerConfig
from vla_rl.envs.config import EnvConfig
from vla_rl.rewards.config import RewardConfig


@dataclass
class RLPolicyConfig:
    name: str = "token_vla"
    """Chunk-policy family of the checkpoint (``token_vla``, ``chunk_vla``, ``pi0``, ``flow_mlp``)."""
    init_from: str | None = None
    """The starting policy: an SFT run folder (its latest checkpoint), an SFT checkpoint folder, or
    a folder written by the family's ``save_pretrained``."""
    freeze: list[str] = field(default_factory=list)
    """Parameter-name prefixes kept fixed during RL, e.g. ``[model.model.vlm.]`` trains pi0's
    action expert (and the heads) only; empty trains everything."""
    exploration: dict[str, Any] = field(default_factory=dict)
    """Flow policies: settings passed to ``set_exploration`` (``exploration: flow_sde``,
    ``noise_level``, ``sde_one_step``, ``noise_std_bounds``, ``noise_std_profile``, ``noise_mean``,
    ``noisy_chunk_steps``, ``chain_log_prob``, and for pi0 any other ``Pi0PolicyConfig`` field such
    as ``reuse_frozen_prefix``); empty keeps the checkpoint's."""
    exploration_final: dict[str, Any] = field(default_factory=dict)
    """Flow policies: where ``noise_level`` and/or ``noise_std_bounds`` arrive, linearly from their
    ``exploration`` values, at minute ``exploration_anneal_minutes`` of the run's clock (held after);
    empty keeps the noise fixed (``vla_rl.training.chunk_rl.exploration_anneal``)."""
    exploration_anneal_minutes: float = 0.0
    """The minute of the run's wall clock (``max_minutes``' clock) at which ``exploration_final`` is
    reached."""


@dataclass
class RLEvalConfig:
    interval: int = 5
    """Evaluate every this many iterations (and before the first and after the last); <= 0: only
    before and after."""
    num_episodes: int = 64
    """Episodes per evaluation; <= 0 disables evaluation."""
    deterministic: bool = True
    """Greedy tokens / noise-free chains."""
    temperature: float | None = None
    """Sampling temperature of the evaluations that sample (``deterministic: false``); None: the
    rollouts' ``algorithm.temperature``. Rollouts may explore hotter than the policy is deployed
    (SimpleVLA-RL samples at 1.6 and evaluates cooler), and the evaluation judges the deployed one."""
    ood_splits: list[str] = field(default_factory=list)
    """Out-of-distribution splits evaluated before and after training, next to ``env.split``."""
    num_envs: int = 0
    """Worlds that run an evaluation (<= 0: ``env.num_envs``). Which initial states the episodes
    start from depends on it (world k's episodes follow one another from its reset), so runs that
    train with different world counts are judged on the same episodes only with the same value."""


@dataclass
class VLARLConfig:
    policy: RLPolicyConfig = field(default_factory=RLPolicyConfig)
    """The policy to fine-tune."""
    algorithm: ChunkRLConfig = field(default_factory=ChunkRLConfig)
    """PPO or GRPO and their settings."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Simulator and task (cameras and image size must match what the policy was trained on)."""
    eval: RLEvalConfig = field(default_factory=RLEvalConfig)
    """Evaluation in the simulator."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward from a reward model (default: the environment's). With a model, PPO needs
    ``algorithm.reward=dense`` and GRPO ``algorithm.score=return`` so the model's reward is what counts."""
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    """Where metrics go (``log_interval`` counts iterations)."""
    iterations: int = 100
    """RL iterations (rollout + update) at most."""
    max_minutes: float = 0.0
    """Stop after the iteration that passes this wall-clock budget (evaluations included; a resumed
    run counts the time before its checkpoint); <= 0: none."""
    seed: int = 0
    """Seeds the rollouts, the minibatch order and the evaluation worlds."""
    run_dir: str = "runs/rl"
    """Output folder for checkpoints, logs and evaluation summaries."""
    checkpoint_interval: int = 10
    """Write a checkpoint every this many iterations (and at the end or on a stop signal)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (oldest pruned); <= 0 keeps all."""
    resume: str | None = None
    """Checkpoint or run folder to continue from; ``auto`` = this run_dir's latest, if any."""
    device: str = "cpu"
    """Torch device of the policy."""
    torch_num_threads: int = 2
    """Threads torch uses on CPU."""
    success_target: float | None = None
    """If set, the command exits with status 1 when the final success rate is below it."""
