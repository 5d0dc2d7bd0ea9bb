"""The typed schema of an RL fine-tuning run of a chunk policy (``configs/rl.yaml``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vla_rl.algorithms.chunk_config import ChunkRLConfig
from vla_rl.config.distributed import DistributedConfig
from vla_rl.config.schema import RunConfig
from vla_rl.policies.import_settings import ImportSettings
from vla_rl.policies.lora import LoraSettings
from vla_rl.rewards.config import RewardConfig


class _OptionalSettings:
    def given(self) -> dict[str, Any]:
        """The settings that are set (not None), as ``set_exploration`` keywords."""
        return {name: value for name, value in asdict(self).items() if value is not None}


@dataclass
class ExplorationSettings(_OptionalSettings):
    """A flow policy's exploration for RL (``pi0``, ``flow_mlp``; ``vla_rl.policies.flow.exploration``).
    None keeps the value the checkpoint was saved with."""

    exploration: str | None = None
    """The chain's exploration: ``euler_maruyama``, ``flow_sde`` (Flow-SDE) or ``flow_noise`` (Flow-Noise)."""
    noise_level: float | None = None
    """``flow_sde``: ``a`` in ``sigma_t = a sqrt(t / (1 - t))``; ``euler_maruyama``: the injected
    std (>= 0)."""
    sde_one_step: bool | None = None
    """``flow_sde``: only one randomly chosen denoising step per sample is stochastic."""
    noise_std_bounds: list[float] | None = None
    """``flow_noise``: ``[min, max]`` of the standard deviation the noise head sets (0 < min < max)."""
    noise_std_profile: str | None = None
    """``flow_noise``: ``flat`` (the same bounds at every denoising step) or ``sde`` (scaled per step
    as Flow-SDE's ``sigma_t``)."""
    noise_mean: str | None = None
    """``flow_noise``: each noisy step's mean, ``euler`` (the ODE step) or ``sde`` (Flow-SDE's
    marginal-preserving mean for the learned variance)."""
    noisy_chunk_steps: int | None = None
    """Sample only the first this many steps of each chunk (the executed ones; >= 0, 0: all); the
    others take the ODE step and leave the log-probability."""
    chain_log_prob: str | None = None
    """``sum`` (the chain's exact log-likelihood) or ``mean`` over its stochastic denoising steps."""
    reuse_frozen_prefix: bool | None = None
    """``pi0`` only: while the VLM is frozen, encode each observation's prefix once per update and
    reuse it in every epoch."""


@dataclass
class AnnealedExploration(_OptionalSettings):
    """Where the annealed exploration settings end (None: that setting is not annealed)."""

    noise_level: float | None = None
    """Flow-SDE's ``a`` (or Euler-Maruyama's std) at update ``exploration_anneal_updates`` (>= 0)."""
    noise_std_bounds: list[float] | None = None
    """Flow-Noise's ``[min, max]`` std bounds at update ``exploration_anneal_updates`` (0 < min < max)."""


MODEL_DTYPES = ("float32", "bfloat16")
"""The values of ``policy.dtype``."""
AUTOCAST_DTYPES = ("none", "bfloat16")
"""The values of ``policy.autocast``."""


@dataclass
class RLPolicyConfig(ImportSettings):
    """The policy to fine-tune; the maps (``action_map``, ``state_map``, ``camera_map``) fit an
    imported LeRobot checkpoint to the env (``vla_rl.policies.env_maps``)."""

    name: str = "token_vla"
    """Chunk-policy family of the checkpoint (``token_vla``, ``chunk_vla``, ``pi0``, ``flow_mlp``)."""
    init_from: str | None = None
    """The starting policy: an SFT run folder (its latest checkpoint), an SFT checkpoint folder, or
    a folder written by the family's ``save_pretrained``, or (``pi0``, ``pi05``) a LeRobot policy folder
    or an openpi PyTorch export."""
    freeze: list[str] = field(default_factory=list)
    """Parameter-name prefixes kept fixed during RL, e.g. ``[model.model.vlm.]`` trains pi0's
    action expert (and the heads) only; empty trains everything."""
    exploration: ExplorationSettings = field(default_factory=ExplorationSettings)
    """Flow policies: how the denoising chain explores during RL (passed to ``set_exploration``);
    every field left at None keeps the checkpoint's value."""
    exploration_final: AnnealedExploration = field(default_factory=AnnealedExploration)
    """Flow policies: where ``noise_level`` and/or ``noise_std_bounds`` arrive, linearly from their
    ``exploration`` values, after ``exploration_anneal_updates`` updates (held after); both None
    keep the noise fixed (``vla_rl.training.chunk_rl.exploration_anneal``)."""
    exploration_anneal_updates: int = 0
    """The update (iteration) at which ``exploration_final`` is reached; the update counter lives in
    the checkpoint, so the noise of an update is the same on any machine and after a resume."""
    dtype: str = "float32"
    """The pretrained model's weights during RL: ``float32`` or ``bfloat16`` (``pi0``, ``pi05``;
    half the memory; the heads, log-probabilities and losses stay float32; saved in that dtype)."""
    autocast: str = "none"
    """Mixed precision: ``bfloat16`` runs the policy's matrix products in bf16 under
    ``torch.autocast`` (rollouts, evaluations and the update alike) while its weights, gradients and
    Adam state stay float32, so small steps are not rounded away; log-probabilities, ratios and
    losses are float32. ``none``: compute in the weights' dtype. Needs ``dtype: float32``. Any family."""
    activation_checkpointing: bool = False
    """Token VLAs (``token_vla``, ``chunk_vla``): recompute the backbone's layer activations in the
    update's backward pass instead of keeping them (less memory, one more forward pass of the
    layers, the same numbers). The flow families (``pi0``, ``pi05``, ``smolvla``) refuse it: their
    action expert writes the prefix's KV cache inside each layer, which a recomputation would repeat."""
    lora: LoraSettings | None = None
    """Add LoRA adapters to a policy loaded without them (``pi0``): RL then trains the adapters,
    the heads and the family's small projections, the rest frozen. None trains the policy as it
    was saved (with the adapters it has, if any). Saved with the policy, so a resume keeps them."""


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
class VLARLConfig(RunConfig):
    """``vla-rl train recipe=NAME``: RL fine-tuning of a chunk policy (``configs/rl.yaml``)."""

    # RunConfig's settings with this config's defaults (documented there):
    job: str = "rl"
    run_dir: str = "runs/rl"
    checkpoint_interval: int = 10
    keep_checkpoints: int = 2
    torch_num_threads: int = 2
    policy: RLPolicyConfig = field(default_factory=RLPolicyConfig)
    """The policy to fine-tune."""
    algorithm: ChunkRLConfig = field(default_factory=ChunkRLConfig)
    """PPO or GRPO and their settings."""
    eval: RLEvalConfig = field(default_factory=RLEvalConfig)
    """Evaluation in the simulator."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Reward from a reward model (default: the environment's). With a model, PPO needs
    ``algorithm.reward=dense`` and GRPO ``algorithm.score=return`` so the model's reward is what counts."""
    iterations: int = 100
    """The run's budget in updates (iterations of rollout + update); every schedule counts them."""
    max_minutes: float = 0.0
    """Wall-clock cap of the whole run in minutes, evaluations included (a resumed run counts the time
    before its checkpoint): training stops early enough to leave time for the final evaluation,
    measured on the first one; <= 0: none. It only stops a run, it never changes its maths."""
    device: str = "cpu"
    """Torch device of the policy (its rollouts and evaluations run in the training process)."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Where the env workers and the update run (default: all in this process): ``env_workers`` Ray
    actors step the worlds, ``trainer_ranks`` data-parallel ranks run the update, each on its share
    of every minibatch, with the training process's policy receiving each new version of the weights
    (its version and checksum checked)."""
