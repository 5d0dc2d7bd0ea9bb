"""The typed schema of a training run; Hydra YAML in ``configs/`` is validated against it."""

from __future__ import annotations

from dataclasses import dataclass, field

from vla_rl.algorithms.config import PPOConfig
from vla_rl.config.distributed import DistributedConfig
from vla_rl.envs.config import EnvConfig
from vla_rl.policies.config import PolicyConfig
from vla_rl.rewards.config import RewardConfig


@dataclass
class LoggerConfig:
    progress_bar: bool = True
    """Console progress bar with env-steps/s and success rate."""
    tensorboard: bool = True
    """Write TensorBoard event files under ``<run_dir>/tensorboard``."""
    wandb_mode: str = "offline"
    """Weights & Biases: ``offline`` (default, never needs the network), ``online`` or ``disabled``."""
    wandb_project: str = "vla-rl"
    """W&B project name."""
    wandb_entity: str | None = None
    """W&B entity (team or user); ``None`` uses the account default."""
    wandb_group: str | None = None
    """W&B group, e.g. to gather the seeds of one experiment."""
    log_interval: int = 1
    """Write metrics every this many iterations."""


@dataclass
class EvalConfig:
    num_episodes: int = 64
    """Episodes evaluated after training (and by ``vla-rl eval``)."""
    deterministic: bool = True
    """Act with the policy mean instead of sampling."""
    video: bool = True
    """Write mp4 videos of evaluation episodes."""
    video_envs: int = 4
    """How many worlds are recorded into the video (side by side)."""
    video_camera: str = "front"
    """Camera rendered for the video."""
    video_size: int = 128
    """Height and width of video frames in pixels."""
    split: str = "train"
    """Randomisation split evaluated (``train`` or an ``ood_*`` split)."""
    num_envs: int = 0
    """Worlds used for evaluation; ``<= 0`` uses the training env's ``num_envs``."""


@dataclass
class RunConfig:
    """What the config of every job holds: the job, its env and logger, seeding, output folder,
    checkpoints and the success target. ``TrainConfig``, ``VLARLConfig`` and ``SFTConfig`` extend it,
    each with its own defaults."""

    job: str = "ppo"
    """The job that wrote this config (``vla_rl.training.jobs``), recorded so ``--resume`` runs the same
    job; fixed by the command, not a setting."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Simulator and task (of ``vla-rl sft``: the one its evaluations run in). A chunk policy's
    cameras and image size must match what it was trained on (for SFT: the demonstrations')."""
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    """Where metrics go (``log_interval`` counts iterations; in SFT, optimizer steps)."""
    seed: int = 0
    """Seeds Python, numpy, torch and the environment: the policy initialisation, the rollouts, the
    minibatch order and the evaluation worlds; the same seed gives the same run on CPU."""
    run_dir: str = "runs/default"
    """Output folder for checkpoints, logs, videos and evaluation summaries."""
    checkpoint_interval: int = 50
    """Write a checkpoint every this many iterations (in SFT, optimizer steps), and always at the end
    or on a stop signal."""
    keep_checkpoints: int = 3
    """Checkpoints kept on disk (oldest pruned); ``<= 0`` keeps all."""
    resume: str | None = None
    """Checkpoint or run folder to continue from exactly (including env and RNG state); ``auto``:
    this ``run_dir``'s latest checkpoint, if any."""
    torch_num_threads: int = 1
    """Threads torch uses on CPU for the network; the simulator has its own (``env.num_threads``)."""
    success_target: float | None = None
    """If set, the command exits with status 1 when the final evaluation's success rate is below it."""


@dataclass
class TrainConfig(RunConfig):
    """``vla-rl train``: PPO of a state or pixel policy on a task (``configs/train.yaml``)."""

    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Policy network."""
    algorithm: PPOConfig = field(default_factory=PPOConfig)
    """RL algorithm and its hyperparameters."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward from a reward model, alone or mixed with the environment's (default: environment only)."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation after training."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Where the env workers and PPO's update run (default: all in this process)."""
    total_env_steps: int = 1_000_000
    """Training stops after this many environment steps (summed over worlds)."""
    max_minutes: float = 0.0
    """Wall-clock cap of the run in minutes, ``vla-rl train``'s final evaluation included: training
    stops early enough to leave time for it (``vla_rl.training.budget``); ``<= 0`` disables. It only
    stops a run: every schedule counts updates or env steps."""
