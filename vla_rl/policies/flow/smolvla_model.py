"""The SmolVLA network: a SmolVLM backbone (transformers' vision tower, connector and Llama text
layers, the latter cut to ``num_vlm_layers``), a narrower Llama action expert interleaved with it
(``smolvla_layers``), and the projections of state, noisy actions, time and velocity.

Prefix: each camera's image tokens (vision tower -> pixel-shuffle connector, times sqrt(width)), the
instruction's token embeddings (times sqrt(width)), then one state token (``state_proj``). Images
and instruction attend to one another (bidirectionally, padding masked out); the state token starts
a new block, so it sees them all and they do not see it. Suffix: one token per action of the chunk,
``mlp_out(silu(mlp_in([action_in_proj(x_t), sincos(t)])))``; the expert's output goes through
``action_out_proj`` to the velocity ``v = noise - action`` (pi0's convention, ``chain``).
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig, SmolVLMConfig, SmolVLMModel
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

from vla_rl.policies.flow import smolvla_layers
from vla_rl.policies.flow.smolvla_config import SmolVLAArchitecture
from vla_rl.policies.flow.smolvla_layers import PrefixKV


def expert_intermediate_size(width: int, multiplier: int = 4, multiple_of: int = 256) -> int:
    """The expert MLP's width for hidden width ``width``: 2/3 of ``multiplier`` x width, rounded
    up to a multiple of ``multiple_of`` (each product truncated to an integer first)."""
    size = int(multiplier * int(2 * width / 3))
    return multiple_of * math.ceil(size / multiple_of)


def time_embedding(time: torch.Tensor, width: int, min_period: float, max_period: float) -> torch.Tensor:
    """float32 [N, width]: sines then cosines of ``2 pi t / period`` for ``width / 2`` periods
    spaced geometrically from ``min_period`` to ``max_period`` (computed in float64)."""
    if width % 2:
        raise ValueError(f"the time embedding needs an even width, got {width}")
    dtype = torch.float32 if time.device.type == "mps" else torch.float64
    fraction = torch.linspace(0.0, 1.0, width // 2, dtype=dtype, device=time.device)
    period = min_period * (max_period / min_period) ** fraction
    angle = (1.0 / period * 2 * math.pi)[None, :] * time[:, None]
    return torch.cat([angle.sin(), angle.cos()], dim=1).float()


def denoising_times(num_steps: int) -> torch.Tensor:
    """float32 [K + 1]: the times of the K Euler steps and the end, ``t_0 = 1`` and ``t_{k+1} = t_k +
    dt`` summed in float32 (SmolVLA's own grid; ``chain.denoising_times`` rounds ``1 + k dt`` instead,
    which differs in the last bit, and the sharp time embedding carries that into the actions)."""
    dt = torch.tensor(-1.0 / num_steps, dtype=torch.float32)
    times = [torch.tensor(1.0, dtype=torch.float32)]
    for _ in range(num_steps):
        times.append(times[-1] + dt)
    return torch.stack(times)


def block_attention(valid: torch.Tensor, block_starts: torch.Tensor) -> torch.Tensor:
    """bool [N, L, L]: token i may attend to token j when both are real (``valid`` [N, L]) and j's
    block does not start after i's (``block_starts`` bool [L]: a new block begins at that token)."""
    block = block_starts.long().cumsum(0)
    same_or_earlier = block[None, :] <= block[:, None]
    return same_or_earlier[None] & valid[:, None, :] & valid[:, :, None]


class SmolVLAExpert(nn.Module):
    """The action expert: Llama decoder layers (keys/values of cross-attention layers read the VLM's
    key/value width) and a final RMS norm; it has no token embedding."""

    def __init__(self, config: LlamaConfig, prefix_kv_width: int, reads_prefix: list[bool]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(config, index) for index in range(config.num_hidden_layers)
        )
        kv_width = config.num_key_value_heads * config.head_dim
        for layer, cross in zip(self.layers, reads_prefix, strict=True):
            if cross:
                bias = config.attention_bias
                layer.self_attn.k_proj = nn.Linear(prefix_kv_width, kv_width, bias=bias)
                layer.self_attn.v_proj = nn.Linear(prefix_kv_width, kv_width, bias=bias)
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)


class SmolVLAModel(nn.Module):
    """SmolVLA's network (parameter names follow LeRobot's below its ``model.`` prefix: ``vlm.`` is
    ``vlm_with_expert.vlm.model.``, ``expert.`` is ``vlm_with_expert.lm_expert.``)."""

    def __init__(self, vlm_config: SmolVLMConfig, arch: SmolVLAArchitecture) -> None:
        super().__init__()
        self.arch = arch
        vlm_config = copy.deepcopy(vlm_config)
        text = vlm_config.text_config
        if 0 < arch.num_vlm_layers < text.num_hidden_layers:
            text.num_hidden_layers = arch.num_vlm_layers
        self.vlm = SmolVLMModel(vlm_config)
        num_vlm_layers = text.num_hidden_layers
        num_expert_layers = arch.num_expert_layers if arch.num_expert_layers > 0 else num_vlm_layers
        if num_vlm_layers % num_expert_layers:
            raise ValueError(
                f"{num_vlm_layers} VLM layers are no multiple of {num_expert_layers} expert ones"
            )
        expert_config = copy.deepcopy(text)
        expert_config.head_dim = text.head_dim
        expert_config.hidden_size = int(text.hidden_size * arch.expert_width_multiplier)
        expert_config.intermediate_size = expert_intermediate_size(expert_config.hidden_size)
        expert_config.num_hidden_layers = num_expert_layers
        reads_prefix = [
            smolvla_layers.expert_reads_prefix_width(i, arch.attention_mode, arch.self_attn_every_n_layers)
            for i in range(num_expert_layers)
        ]
        self.expert = SmolVLAExpert(expert_config, text.num_key_value_heads * text.head_dim, reads_prefix)
        self.plans = smolvla_layers.layer_plan(
            num_vlm_layers, num_expert_layers, arch.attention_mode, arch.self_attn_every_n_layers
        )
        width, expert_width = text.hidden_size, expert_config.hidden_size
        self.width, self.expert_width = width, expert_width
        self.state_proj = nn.Linear(arch.max_state_dim, width)
        self.action_in_proj = nn.Linear(arch.max_action_dim, expert_width)
        self.action_out_proj = nn.Linear(expert_width, arch.max_action_dim)
        self.action_time_mlp_in = nn.Linear(2 * expert_width, expert_width)
        self.action_time_mlp_out = nn.Linear(expert_width, expert_width)

    # ----- prefix ---------------------------------------------------------------------------------------

    def embed_image(self, pixels: torch.Tensor) -> torch.Tensor:
        """float [N, 3, H, W] in [-1, 1] -> image tokens [N, T, width] (scaled by sqrt(width))."""
        vision = self.vlm.vision_model
        features = vision(pixel_values=pixels.to(vision.dtype)).last_hidden_state
        tokens = self.vlm.connector(features)
        return tokens * torch.tensor(tokens.shape[-1] ** 0.5, dtype=tokens.dtype, device=tokens.device)

    def encode_prefix(
        self,
        images: list[torch.Tensor],
        tokens: torch.Tensor,
        token_mask: torch.Tensor,
        state: torch.Tensor,
    ) -> PrefixKV:
        """Images (one [N, 3, H, W] per camera, in [-1, 1]), instruction ``tokens`` [N, T] with
        ``token_mask`` (bool, right padding) and the padded state [N, max_state_dim] -> the prefix."""
        batch = state.shape[0]
        device = state.device
        parts = [self.embed_image(image) for image in images]
        text = self.vlm.text_model.get_input_embeddings()(tokens)
        parts.append(text * math.sqrt(text.shape[-1]))
        parts.append(self.state_proj(state.to(self.state_proj.weight.dtype))[:, None, :])
        text_dtype = self.vlm.text_model.norm.weight.dtype
        embeds = torch.cat([part.to(text_dtype) for part in parts], dim=1)
        image_tokens = sum(part.shape[1] for part in parts[:-2])
        valid = torch.cat(
            [
                torch.ones(batch, image_tokens, dtype=torch.bool, device=device),
                token_mask.bool(),
                torch.ones(batch, 1, dtype=torch.bool, device=device),
            ],
            dim=1,
        )
        block_starts = torch.zeros(embeds.shape[1], dtype=torch.bool, device=device)
        block_starts[-1] = True  # the state token
        allowed = block_attention(valid, block_starts)
        positions = valid.long().cumsum(-1) - 1
        text_model = self.vlm.text_model
        return smolvla_layers.encode_prefix(
            text_model.layers, text_model.norm, embeds, allowed, positions, valid
        )

    # ----- suffix ---------------------------------------------------------------------------------------

    def embed_suffix(self, x_t: torch.Tensor, time: torch.Tensor) -> torch.Tensor:
        """Noisy actions [N, S, max_action_dim] at ``time`` [N] -> expert input tokens [N, S, We]."""
        actions = self.action_in_proj(x_t.to(self.action_in_proj.weight.dtype))
        times = time_embedding(time, self.expert_width, self.arch.min_period, self.arch.max_period)
        times = times.to(actions.dtype)[:, None, :].expand_as(actions)
        mixed = F.silu(self.action_time_mlp_in(torch.cat([actions, times], dim=2)))
        return self.action_time_mlp_out(mixed)

    def velocity(
        self, prefix: PrefixKV, x_t: torch.Tensor, time: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(velocity [N, S, max_action_dim] float32, expert features [N, S, We] float32) of ``x_t``
        at ``time``; each part computes in its weights' dtype (``cast_model``)."""
        suffix = self.embed_suffix(x_t, time).to(self.expert.norm.weight.dtype)
        hidden = smolvla_layers.run_suffix(self.plans, self.expert.layers, self.expert.norm, prefix, suffix)
        hidden = hidden[:, -self.arch.chunk_size :].float()
        return self.action_out_proj(hidden.to(self.action_out_proj.weight.dtype)).float(), hidden

    def flow_losses(
        self, prefix: PrefixKV, actions: torch.Tensor, noise: torch.Tensor, time: torch.Tensor
    ) -> torch.Tensor:
        """Squared velocity errors [N, S, max_action_dim] on ``x_t = t noise + (1 - t) actions``."""
        t = time[:, None, None]
        x_t = t * noise + (1 - t) * actions
        velocity, _ = self.velocity(prefix, x_t, time)
        return F.mse_loss(noise - actions, velocity, reduction="none")

    def sample(self, prefix: PrefixKV, noise: torch.Tensor, num_steps: int) -> torch.Tensor:
        """The Euler ODE from ``noise`` (t = 1) to the action chunk (t = 0) in ``num_steps`` steps."""
        dt = torch.tensor(-1.0 / num_steps, dtype=torch.float32, device=noise.device)
        x_t = noise
        for time in denoising_times(num_steps)[:-1].tolist():
            velocity, _ = self.velocity(prefix, x_t, torch.full((len(noise),), time, device=noise.device))
            x_t = x_t + dt * velocity
        return x_t
