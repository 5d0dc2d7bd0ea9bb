"""Configuration of the token VLA families and a tiny PaliGemma backbone for CPU tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import GemmaConfig, PaliGemmaConfig, SiglipVisionConfig

from vla_rl.policies.chunk_policy import proprio_columns
from vla_rl.policies.lora import LoraSettings
from vla_rl.policies.pretrained_io import DictConfig
from vla_rl.policies.vla.auxiliary import check_auxiliary_settings

PALIGEMMA_LORA_TARGETS = (
    *("q_proj", "k_proj", "v_proj", "o_proj"),
    *("gate_proj", "up_proj", "down_proj"),
    "lm_head",
)
"""The token VLA families' default LoRA targets: the Gemma and SigLIP attention projections, Gemma's
MLP, and the output head, so that the action-bin logits can move: its weights are tied to the frozen
input embeddings, and without an adapter the reachable logit range stays that of the pretrained (or
freshly initialised) vocabulary. The tied input embedding gets the same adapter (peft's
``ensure_weight_tying``), so the two stay one matrix."""


@dataclass
class VLAInputConfig:
    """What the VLA families (``TokenVLAConfig``, ``Pi0PolicyConfig``) read from an observation and
    the auxiliary loss SFT may add to theirs."""

    camera_keys: list[str] = field(default_factory=lambda: ["front"])
    """Cameras fed to the model in this order, read from ``obs["rgb_<camera>"]``."""
    image_mean: float = 0.5
    """Pixel normalisation ``(x / 255 - mean) / std`` (SigLIP: 0.5, 0.5 -> [-1, 1])."""
    image_std: float = 0.5
    """See ``image_mean``."""
    max_instruction_tokens: int = 48
    """Instructions are truncated to this many tokens (the prompt separator is always kept)."""
    freeze_vision: bool = False
    """Keep the vision tower (SigLIP) and its projector frozen during fine-tuning."""
    proprio_fields: list[str] | None = None
    """Named parts of ``obs["proprio"]`` to keep (``arm_qpos``, ``arm_qvel``,
    ``gripper_opening_m``, ``tcp_pos``, ``tcp_rot6``); None keeps all. Leaving out the joint
    velocities removes a shortcut of behaviour cloning: from the second step of a demonstration
    on, the velocity tells which way the expert is already moving, so a model can copy the motion
    and never learn the decision (which cube the instruction names) that started it."""
    aux_target_key: str | None = None
    """Vector observation (e.g. ``privileged``) that SFT also regresses from the feature the value
    head reads (the token VLAs' last prompt position, pi0's action-expert state token), an auxiliary
    loss that teaches the model to read the instruction (see ``vla_rl.policies.vla.auxiliary``);
    None: no auxiliary loss. Acting never reads it."""
    aux_target_dim: int = 0
    """Width of ``obs[aux_target_key]``."""
    aux_coef: float = 1.0
    """Weight of the auxiliary mean squared error in the SFT loss."""
    aux_layer: int | None = None
    """Layer (1-based) whose output the auxiliary head reads: a decoder layer at the last prompt
    position (token VLAs) or an action-expert layer at the state token (pi0); None: the final hidden
    state (the value head's feature). In a token VLA a middle layer leaves the layers above it to
    carry what it learned to every action position: an action token other than the first is
    predicted at an action position, which must otherwise find the target in the prompt itself."""

    def __post_init__(self) -> None:
        check_auxiliary_settings(self.aux_target_key, self.aux_target_dim, self.aux_coef)
        if self.proprio_fields is not None:
            proprio_columns(self.proprio_fields)  # unknown names fail here, before any work


@dataclass
class TokenVLAConfig(VLAInputConfig, DictConfig):
    """Shared by ``TokenVLA`` (autoregressive) and ``ChunkVLA`` (parallel decoding)."""

    chunk_len: int = 4
    """Actions per chunk."""
    action_dim: int = 4
    """Values per action (4 for the ``ee_delta_pos`` control)."""
    num_bins: int = 256
    """Uniform bins per action dimension, mapped to the last ``num_bins`` vocabulary ids."""
    image_size: int | None = None
    """Side in pixels images are resized to; None = the vision tower's ``image_size``."""
    use_proprio: bool = False
    """Feed the state vector (``state_keys``) as extra prompt embeddings (one, or one per
    ``state_token_sizes`` group): learned linear projections to the text hidden size, placed
    between the image tokens and the instruction."""
    proprio_dim: int = 0
    """Width of the state vector (sum over ``state_keys``, after ``proprio_fields``); needed when
    ``use_proprio``."""
    state_keys: list[str] = field(default_factory=lambda: ["proprio"])
    """Vector observations concatenated into the state, e.g. ``["proprio", "objects"]``."""
    state_token_sizes: list[int] | None = None
    """Split the state into consecutive groups of these widths, each projected to its own prompt
    token (e.g. ``[24, 3, 3, 3, 2, 2, 2]``: proprioception, three cubes, three pads), so that
    attention can pick out one object; None puts the whole state in one token."""
    normalize_state: bool = True
    """Standardise the state with running statistics (fit on the demonstrations by SFT, stored
    with the checkpoint) before projecting it: joint angles in radians and object positions in
    metres otherwise differ in scale by an order of magnitude."""
    lora: LoraSettings | None = None
    """Low-rank adaptation when set; full fine-tuning of the backbone when None."""
    value_hidden_dim: int = 64
    """Hidden width of the value-head MLP (and of the auxiliary head)."""
    action_low: list[float] | None = None
    """Per-dimension 1st-percentile action statistic; None = -1 (the env's normalised range)."""
    action_high: list[float] | None = None
    """Per-dimension 99th-percentile action statistic; None = +1."""
    use_kv_cache: bool = True
    """``TokenVLA`` decoding: feed one token at a time with the key/value cache (True), or
    recompute the whole sequence for every token (False, a reference for benchmarks)."""

    def __post_init__(self) -> None:
        if isinstance(self.lora, dict):
            self.lora = LoraSettings(**self.lora)
        if self.use_proprio and self.proprio_dim <= 0:
            raise ValueError("use_proprio needs proprio_dim > 0")
        super().__post_init__()
        if self.state_token_sizes is not None and sum(self.state_token_sizes) != self.proprio_dim:
            raise ValueError(
                f"state_token_sizes {self.state_token_sizes} sum to {sum(self.state_token_sizes)}, "
                f"not proprio_dim {self.proprio_dim}"
            )


TINY_BACKBONE_ARGS = (
    "hidden_size",
    "num_layers",
    "num_heads",
    "head_dim",
    "intermediate_size",
    "vision_hidden_size",
    "vision_layers",
    "vision_heads",
    "image_size",
    "patch_size",
)
"""Sizes of the fresh tiny PaliGemma that ``TokenVLABuildSettings.backbone`` may set (the other
arguments of ``tiny_paligemma_config`` come from the tokenizer)."""


@dataclass
class TokenVLABuildSettings(TokenVLAConfig):
    """The construction values of ``token_vla`` and ``chunk_vla`` (an SFT config's ``policy.kwargs``,
    the keywords of ``build``): every ``TokenVLAConfig`` field plus where the backbone comes from."""

    pretrained_vlm_dir: str | None = None
    """Local PaliGemma folder to start from; None builds a fresh tiny PaliGemma (CPU tests)."""
    backbone: dict[str, int] | None = None
    """Sizes of the fresh tiny PaliGemma, e.g. ``{num_layers: 4}`` (names in ``TINY_BACKBONE_ARGS``);
    None: ``tiny_paligemma_config``'s defaults."""
    instructions: list[str] | None = None
    """Corpus of the fresh backbone's word tokenizer; None: the built-in tasks' instructions."""


def tiny_paligemma_config(
    vocab_size: int,
    image_token_id: int,
    pad_token_id: int = 0,
    bos_token_id: int = 2,
    eos_token_id: int = 1,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    head_dim: int = 16,
    intermediate_size: int = 128,
    vision_hidden_size: int = 32,
    vision_layers: int = 2,
    vision_heads: int = 2,
    image_size: int = 32,
    patch_size: int = 8,
) -> PaliGemmaConfig:
    """A PaliGemma small enough for CPU tests (SigLIP + Gemma, default ~0.2M parameters).

    ``(image_size / patch_size)^2`` image tokens per camera (16 with the defaults).
    """
    vision = SiglipVisionConfig(
        hidden_size=vision_hidden_size,
        intermediate_size=2 * vision_hidden_size,
        num_hidden_layers=vision_layers,
        num_attention_heads=vision_heads,
        image_size=image_size,
        patch_size=patch_size,
        vision_use_head=False,
    )
    text = GemmaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=1,
        head_dim=head_dim,
        max_position_embeddings=512,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
    )
    return PaliGemmaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=image_token_id,
        vocab_size=vocab_size,
        projection_dim=hidden_size,
        hidden_size=hidden_size,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
    )
