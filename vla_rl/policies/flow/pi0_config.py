"""Configuration of the pi0 policy wrapper and a tiny ``PI0Config`` for CPU tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import GemmaConfig, PI0Config

from vla_rl.policies.flow.exploration import ExplorationConfig
from vla_rl.policies.flow.lerobot_preprocessing import LeRobotPreprocessing
from vla_rl.policies.flow.normalization import NormStats
from vla_rl.policies.lora import LoraSettings
from vla_rl.policies.pretrained_io import DictConfig
from vla_rl.policies.vla.config import VLAInputConfig, tiny_paligemma_config

PI0_LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""pi0's default LoRA targets: Gemma's attention and MLP projections (VLM and action expert) and
SigLIP's query, key and value projections (pi0 has no output head over a vocabulary)."""
PI0_TRAINED_WITH_LORA = ("embed_action_time.", "action_out_proj.")
"""Parameters of pi0 that train in full beside the adapters: the small projections between the
action expert and the action, state and time (as openpi's LoRA fine-tuning keeps them)."""


@dataclass
class Pi0PolicyConfig(ExplorationConfig, VLAInputConfig, DictConfig):
    """What our wrapper adds around transformers' pi0 model (saved as JSON next to its weights)."""

    action_dim: int = 4
    """Real action values per step (4 for ``ee_delta_pos``); the model's actions are padded to
    ``max_action_dim`` and the extra dims are dropped."""
    num_denoising_steps: int | None = None
    """Euler steps K from noise to action; None = the model's ``num_inference_steps``."""
    value_hidden_dim: int = 64
    """Hidden width of the value-head MLP on the expert's state-token feature."""
    reuse_frozen_prefix: bool = True
    """While no VLM parameter trains, an RL update encodes each observation's prefix once and every
    epoch reuses its keys and values (``observation_cache``); memory per row: layers x 2 x kv_heads x
    prefix tokens x head_dim floats. False encodes the prefix again in every minibatch."""
    action_stats: NormStats = field(default_factory=NormStats)
    """Normalisation of actions (env units -> model units)."""
    state_stats: NormStats = field(default_factory=NormStats)
    """Normalisation of the state vector before padding to ``max_state_dim``."""
    state_keys: list[str] = field(default_factory=lambda: ["proprio"])
    """Vector observations concatenated into the state, e.g. ``["proprio", "objects"]``; keys
    missing from an observation give an empty state."""
    lora: LoraSettings | None = None
    """Low-rank adapters on the VLM and the action expert (``target_modules`` defaults to their
    attention and MLP projections, ``PI0_LORA_TARGETS``); the base weights stay frozen and the heads
    train. None fine-tunes the whole model."""
    lerobot: LeRobotPreprocessing | None = None
    """Set when the model was imported from a LeRobot ``pi0`` folder: its preprocessing (image
    resize-with-pad, normalisation modes and statistics, prompt), used instead of ``camera_keys``'
    resize, ``image_mean``/``image_std``, ``action_stats``/``state_stats`` and our prompt layout."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.validate_exploration()
        if isinstance(self.lora, dict):
            self.lora = LoraSettings(**self.lora)
        if isinstance(self.lerobot, dict):
            self.lerobot = LeRobotPreprocessing(**self.lerobot)
        if isinstance(self.action_stats, dict):
            self.action_stats = NormStats(**self.action_stats)
        if isinstance(self.state_stats, dict):
            self.state_stats = NormStats(**self.state_stats)


@dataclass
class Pi0BuildSettings(Pi0PolicyConfig):
    """The construction values of ``pi0`` (an SFT config's ``policy.kwargs``, the keywords of
    ``build``): every ``Pi0PolicyConfig`` field, the chunk and state sizes, where the weights come
    from, and the sizes of a fresh tiny pi0 (None: ``tiny_pi0_config``'s defaults)."""

    chunk_len: int = 4
    """Actions per chunk (the model's ``chunk_size``; must match pretrained weights)."""
    proprio_dim: int = 0
    """Width of the state vector; the fresh model's ``max_state_dim`` is at least 8 and this."""
    pretrained_dir: str | None = None
    """Local pi0 weights (transformers' format) to start from; None builds a fresh tiny pi0."""
    instructions: list[str] | None = None
    """Corpus of the fresh model's word tokenizer; None: the built-in tasks' instructions."""
    max_action_dim: int | None = None
    """Padded action width of a fresh model; None: ``max(8, action_dim)``."""
    max_state_dim: int | None = None
    """Padded state width of a fresh model; None: ``max(8, proprio_dim)``."""
    num_inference_steps: int | None = None
    """Denoising steps stored in a fresh model's config."""
    hidden_size: int | None = None
    """Width of a fresh model's Gemma prefix."""
    expert_hidden_size: int | None = None
    """Width of a fresh model's action expert."""
    num_layers: int | None = None
    """Layers of a fresh model's prefix and expert (they share it)."""
    num_heads: int | None = None
    """Attention heads of a fresh model."""
    head_dim: int | None = None
    """Attention head width of a fresh model."""
    vision_hidden_size: int | None = None
    """Width of a fresh model's SigLIP tower."""
    vision_layers: int | None = None
    """Layers of a fresh model's SigLIP tower."""
    image_size: int | None = None
    """Image side in pixels of a fresh model."""
    patch_size: int | None = None
    """SigLIP patch side in pixels of a fresh model."""


def tiny_pi0_config(
    vocab_size: int,
    image_token_id: int,
    chunk_size: int = 4,
    max_action_dim: int = 8,
    max_state_dim: int = 8,
    num_inference_steps: int = 4,
    pad_token_id: int = 0,
    bos_token_id: int = 2,
    eos_token_id: int = 1,
    hidden_size: int = 64,
    expert_hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    head_dim: int = 16,
    vision_hidden_size: int = 32,
    vision_layers: int = 2,
    image_size: int = 32,
    patch_size: int = 8,
) -> PI0Config:
    """A pi0 small enough for CPU tests: ``tiny_paligemma_config``'s 2-layer Gemma prefix and
    2-layer SigLIP, and a 2-layer Gemma action expert.

    The expert attends to the prefix's key/value cache, so both share the number of layers, one
    key/value head and ``head_dim``. ``(image_size / patch_size)^2`` image tokens per camera.
    """
    vlm = tiny_paligemma_config(
        vocab_size,
        image_token_id,
        pad_token_id,
        bos_token_id,
        eos_token_id,
        hidden_size,
        num_layers,
        num_heads,
        head_dim,
        intermediate_size=2 * hidden_size,
        vision_hidden_size=vision_hidden_size,
        vision_layers=vision_layers,
        image_size=image_size,
        patch_size=patch_size,
    )
    expert = GemmaConfig(
        hidden_size=expert_hidden_size,
        intermediate_size=2 * expert_hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=1,
        head_dim=head_dim,
        max_position_embeddings=512,
    )
    return PI0Config(
        vlm_config=vlm,
        dit_config=expert,
        chunk_size=chunk_size,
        max_action_dim=max_action_dim,
        max_state_dim=max_state_dim,
        num_inference_steps=num_inference_steps,
    )
