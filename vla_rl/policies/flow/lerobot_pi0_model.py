"""A LeRobot ``pi0`` / ``pi05`` folder's weights -> transformers' ``PI0ForConditionalGeneration`` /
``PI05ForConditionalGeneration``.

LeRobot's config.json names its Gemma sizes by variant (``paligemma_variant``, ``action_expert_variant``)
and leaves the SigLIP tower at PaliGemma's default; the sizes themselves are in the weights. So the
model config is read from the shapes in ``model.safetensors`` (no tensor is loaded for it): widths,
depths, MLP widths, vocabulary, head width, SigLIP width, depth, patch and image size. Two numbers are
not in any shape and are LeRobot's fixed choices: 8 query heads in both Gemmas (its joint attention
hard-codes them) and SigLIP's 16 attention heads (PaliGemma's default, which LeRobot keeps). A real
checkpoint thereby gives Gemma 2B + Gemma 300M + SigLIP So400m/14 at 224 px, and a reduced one its own
sizes. The weights then load through transformers' own key conversion for LeRobot pi0 checkpoints
(``conversion_mapping`` "pi0", which "pi05" shares); a key that stays missing or unused is a
``ConfigError``. An openpi PyTorch export holds the same state dict without LeRobot's ``model.``
prefix, which that conversion accepts as well; its shapes are read under the prefix here.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn
from transformers import (
    GemmaConfig,
    PaliGemmaConfig,
    PI0Config,
    PI0ForConditionalGeneration,
    PI05Config,
    PI05ForConditionalGeneration,
    PreTrainedModel,
    SiglipVisionConfig,
)

from vla_rl.config.structured import ConfigError
from vla_rl.policies.lerobot_folder import LeRobotFolder

GEMMA_QUERY_HEADS = 8
"""Query heads of both Gemmas in every LeRobot pi0 / pi0.5 (its joint attention is written for 8)."""
SIGLIP_HEADS = 16
"""SigLIP attention heads: PaliGemma's default vision config, which LeRobot does not change."""
GEMMA_ACTIVATION = "gelu_pytorch_tanh"
"""LeRobot sets this activation on both Gemmas."""
LEROBOT_PREFIX = "model."
VLM = "model.paligemma_with_expert.paligemma."
EXPERT = "model.paligemma_with_expert.gemma_expert."
VISION = VLM + "model.vision_tower.vision_model."


def weight_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape of a safetensors file, read from its header."""
    with safe_open(str(path), framework="pt") as handle:
        return {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118


def _shape(shapes: dict[str, tuple[int, ...]], name: str, folder: LeRobotFolder) -> tuple[int, ...]:
    if name not in shapes:
        raise ConfigError(
            f"policy.init_from: {folder.path}/model.safetensors has no {name!r}; it is not a "
            f"{folder.convention} {folder.policy_type} checkpoint"
        )
    return shapes[name]


def _layers(shapes: dict[str, tuple[int, ...]], prefix: str) -> int:
    pattern = re.compile(re.escape(prefix) + r"layers\.(\d+)\.")
    found = {int(m.group(1)) for name in shapes if (m := pattern.match(name))}
    return max(found) + 1 if found else 0


def _gemma(shapes: dict[str, tuple[int, ...]], prefix: str, vocab: int, folder: LeRobotFolder) -> GemmaConfig:
    """A Gemma config from the weights under ``prefix`` (``...model.``)."""
    query = _shape(shapes, prefix + "layers.0.self_attn.q_proj.weight", folder)
    key = _shape(shapes, prefix + "layers.0.self_attn.k_proj.weight", folder)
    gate = _shape(shapes, prefix + "layers.0.mlp.gate_proj.weight", folder)
    head_dim = query[0] // GEMMA_QUERY_HEADS
    return GemmaConfig(
        vocab_size=vocab,
        hidden_size=query[1],
        intermediate_size=gate[0],
        num_hidden_layers=_layers(shapes, prefix),
        num_attention_heads=GEMMA_QUERY_HEADS,
        num_key_value_heads=key[0] // head_dim,
        head_dim=head_dim,
        hidden_act=GEMMA_ACTIVATION,
    )


MODELS = {"pi0": (PI0Config, PI0ForConditionalGeneration), "pi05": (PI05Config, PI05ForConditionalGeneration)}
"""LeRobot policy type -> transformers' config and model classes."""


def pi0_model_config(folder: LeRobotFolder, shapes: dict[str, tuple[int, ...]]) -> PI0Config | PI05Config:
    """transformers' ``PI0Config`` / ``PI05Config`` of a LeRobot pi0 / pi05 folder: sizes from the
    weights, the flow settings (chunk, padded widths, denoising steps, time sampling and embedding
    periods) from config.json. pi0.5 reads its state from the prompt: no ``max_state_dim``."""
    vocab = _shape(shapes, VLM + "lm_head.weight", folder)[0]
    text = _gemma(shapes, VLM + "model.language_model.", vocab, folder)
    expert = _gemma(shapes, EXPERT + "model.", vocab, folder)
    patch = _shape(shapes, VISION + "embeddings.patch_embedding.weight", folder)
    patches = _shape(shapes, VISION + "embeddings.position_embedding.weight", folder)[0]
    image_size = math.isqrt(patches) * patch[-1]
    resolution = list(folder.config.get("image_resolution", [224, 224]))
    if resolution != [image_size, image_size]:
        raise ConfigError(
            f"policy.init_from: {folder.path} resizes images to {resolution} but its SigLIP tower takes "
            f"{image_size} x {image_size}"
        )
    vision = SiglipVisionConfig(
        hidden_size=patch[0],
        intermediate_size=_shape(shapes, VISION + "encoder.layers.0.mlp.fc1.weight", folder)[0],
        num_hidden_layers=_layers(shapes, VISION + "encoder."),
        num_attention_heads=SIGLIP_HEADS,
        image_size=image_size,
        patch_size=patch[-1],
        vision_use_head=False,
    )
    vlm = PaliGemmaConfig(
        text_config=text,
        vision_config=vision,
        projection_dim=text.hidden_size,
        image_token_id=vocab,  # a placeholder id past the vocabulary (as in PaliGemma checkpoints)
    )
    config = folder.config
    config_class = MODELS[folder.policy_type][0]
    state = {"max_state_dim": int(config["max_state_dim"])} if folder.policy_type == "pi0" else {}
    return config_class(
        vlm_config=vlm,
        dit_config=expert,
        chunk_size=int(config["chunk_size"]),
        **state,
        max_action_dim=int(config["max_action_dim"]),
        num_inference_steps=int(config["num_inference_steps"]),
        time_sampling_beta_alpha=float(config["time_sampling_beta_alpha"]),
        time_sampling_beta_beta=float(config["time_sampling_beta_beta"]),
        time_sampling_scale=float(config["time_sampling_scale"]),
        time_sampling_offset=float(config["time_sampling_offset"]),
        min_period=float(config["min_period"]),
        max_period=float(config["max_period"]),
    )


def load_lerobot_pi0_model(folder: LeRobotFolder) -> PreTrainedModel:
    """transformers' PI0 / PI05 with the folder's weights, in float32."""
    weights = folder.path / "model.safetensors"
    shapes = weight_shapes(weights)
    if folder.convention == "openpi":  # openpi's PI0Pytorch keys are LeRobot's without "model."
        shapes = {LEROBOT_PREFIX + name: shape for name, shape in shapes.items()}
    config = pi0_model_config(folder, shapes)
    model, info = MODELS[folder.policy_type][1].from_pretrained(
        folder.path, config=config, local_files_only=True, output_loading_info=True, dtype="float32"
    )
    problems = {
        kind: sorted(info.get(kind, [])) for kind in ("missing_keys", "unexpected_keys", "mismatched_keys")
    }
    problems = {kind: keys for kind, keys in problems.items() if keys}
    if problems:
        raise ConfigError(f"policy.init_from: {weights} does not fit transformers' PI0: {problems}")
    return model


class LeRobotTimestepEmbedding(nn.Module):
    """pi0's sinusoidal time embedding as LeRobot computes it: frequencies and their products with the
    time in float64 (float32 on Apple's MPS, which has no float64), sine and cosine, then cast to the
    time's dtype. transformers' PI0 / PI05 compute it in float32, where an argument of up to
    ``2 pi / min_period`` (1571 rad) carries a rounding of about 1e-4 rad."""

    def __init__(self, width: int, min_period: float, max_period: float) -> None:
        super().__init__()
        self.width, self.min_period, self.max_period = width, min_period, max_period

    def forward(self, time: torch.Tensor) -> torch.Tensor:
        dtype = torch.float32 if time.device.type == "mps" else torch.float64
        fraction = torch.linspace(0.0, 1.0, self.width // 2, dtype=dtype, device=time.device)
        period = self.min_period * (self.max_period / self.min_period) ** fraction
        angle = (1.0 / period * 2 * math.pi)[None, :] * time[:, None]
        return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).to(time.dtype)


def use_lerobot_time_embedding(model: PreTrainedModel) -> None:
    """Give ``model`` (PI0 / PI05) LeRobot's float64 time embedding in place of its float32 one."""
    config = model.config
    model.embed_action_time.sinusoid_embeds = LeRobotTimestepEmbedding(
        config.dit_config.hidden_size, config.min_period, config.max_period
    )
