"""SmolVLA's layer stack: the VLM's text layers and the action expert's layers, interleaved.

Two token streams share one stack. The prefix (images, instruction, state) runs through the VLM's
(Llama) text layers; the suffix (the noisy action chunk) through the narrower expert's layers. VLM
layer ``i`` pairs with an expert layer or with none (the expert may have fewer layers: it then skips
those VLM layers and its stream passes through them unchanged). A paired layer is either

* joint: prefix and suffix compute queries, keys and values with their own projections and attend
  over the concatenated sequence under one mask, or
* cross: the prefix attends to itself; the expert's queries attend only to the prefix's keys and
  values, which the expert's own key/value projections map from the VLM's width.

The prefix never attends to the suffix (its mask rows hold no suffix column), so its keys and values
do not depend on the actions. ``encode_prefix`` computes them once; ``run_suffix`` then runs the
expert stream against them, for each denoising step and for the flow-matching loss alike: the same
numbers as running both streams through the stack together.

Details that decide the numbers: rotary embeddings rotate the two halves of each head with a
wavelength of 10000 (not the backbone's ``rope_theta``); cross-attention queries count positions from
0 while joint-layer queries continue the prefix's count; attention scores are float32, scaled by
``head_dim ** -0.5``, and masked entries get the dtype's lowest value before the softmax.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

ROPE_WAVELENGTH = 10_000.0
"""The longest rotary wavelength SmolVLA uses, whatever the backbone config says."""


@dataclass
class PrefixKV:
    """The prefix of a batch after the VLM stack: what every expert pass attends to."""

    keys: list[torch.Tensor]
    """Per VLM layer: float [N, P, kv_heads, head_dim], rotated."""
    values: list[torch.Tensor]
    """Per VLM layer: float [N, P, kv_heads, head_dim]."""
    valid: torch.Tensor
    """bool [N, P]: real prefix tokens (padding of the instruction is False)."""
    last_feature: torch.Tensor
    """float [N, width]: the VLM's final (normalised) hidden state of the last prefix token (SmolVLA's
    state token, which sees the whole prefix): a feature of the observation alone."""

    def repeat_rows(self, repeats: int) -> PrefixKV:
        """Each row ``repeats`` times in a row (row i -> rows i * repeats ... i * repeats + repeats - 1)."""

        def rep(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.repeat_interleave(repeats, 0)

        return PrefixKV(
            [rep(k) for k in self.keys],
            [rep(v) for v in self.values],
            rep(self.valid),
            rep(self.last_feature),
        )


@dataclass(frozen=True)
class LayerPlan:
    """How VLM layer ``index`` meets the expert."""

    index: int
    """The VLM layer."""
    expert_index: int | None
    """The expert layer paired with it; None: the expert skips this layer."""
    joint: bool
    """Joint attention (prefix and suffix together) rather than cross-attention."""


def layer_plan(
    num_vlm_layers: int, num_expert_layers: int, attention_mode: str, self_attn_every_n_layers: int
) -> list[LayerPlan]:
    """The pairing of VLM and expert layers: with ``ratio = vlm / expert`` layers, VLM layer i has
    expert layer ``i / ratio`` when i is a multiple of the ratio; layer i is joint when the mode is
    ``self_attn`` or i is a multiple of ``self_attn_every_n_layers``."""
    ratio = num_vlm_layers // num_expert_layers
    plans = []
    for index in range(num_vlm_layers):
        expert_index = index // ratio if index % ratio == 0 else None
        joint = attention_mode == "self_attn" or (
            self_attn_every_n_layers > 0 and index % self_attn_every_n_layers == 0
        )
        plans.append(LayerPlan(index, expert_index, joint))
    return plans


def expert_reads_prefix_width(expert_index: int, attention_mode: str, self_attn_every_n_layers: int) -> bool:
    """Whether expert layer ``expert_index`` maps keys/values from the VLM's key/value width (a
    cross-attention layer) instead of its own hidden width. The rule counts expert layers, as the
    checkpoints were built."""
    if attention_mode != "cross_attn":
        return False
    return not (self_attn_every_n_layers > 0 and expert_index % self_attn_every_n_layers == 0)


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of ``x`` [N, L, heads, D] at ``positions`` [N, L]: the first and
    second halves of each head are the two coordinates rotated by ``position / 10000^(2k / D)``."""
    half = x.shape[-1] // 2
    exponents = torch.arange(half, dtype=torch.float32, device=x.device) * (2.0 / x.shape[-1])
    angles = positions[..., None].to(torch.float32) / (ROPE_WAVELENGTH**exponents)[None, None, :]
    cos, sin = angles.cos()[:, :, None, :], angles.sin()[:, :, None, :]
    first, second = x.to(torch.float32).split(half, dim=-1)
    rotated = torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)
    return rotated.to(x.dtype)


def attend(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, allowed: torch.Tensor
) -> torch.Tensor:
    """Grouped-query attention: ``queries`` [N, Lq, H, D], ``keys``/``values`` [N, Lk, Hkv, D] (each
    key/value head serves ``H / Hkv`` consecutive query heads), ``allowed`` bool [N, Lq, Lk].
    Returns [N, Lq, H * D]. A row with nothing allowed averages all values (it is padding)."""
    groups = queries.shape[2] // keys.shape[2]
    keys = keys.repeat_interleave(groups, dim=2)
    values = values.repeat_interleave(groups, dim=2)
    scores = torch.einsum("nqhd,nkhd->nhqk", queries.float(), keys.float()) * queries.shape[-1] ** -0.5
    scores = scores.masked_fill(~allowed[:, None], torch.finfo(scores.dtype).min)
    probs = scores.softmax(dim=-1).to(values.dtype)
    return torch.einsum("nhqk,nkhd->nqhd", probs, values).flatten(2)


def project(layer: nn.Module, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries, keys and values [N, L, heads, head_dim] of a Llama decoder layer's attention."""
    normed = layer.input_layernorm(hidden)
    attention = layer.self_attn
    shape = (*normed.shape[:-1], -1, attention.head_dim)
    return (
        attention.q_proj(normed).view(shape),
        attention.k_proj(normed).view(shape),
        attention.v_proj(normed).view(shape),
    )


def finish_layer(layer: nn.Module, hidden: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
    """The rest of a Llama decoder layer after attention: output projection, residual, MLP, residual."""
    hidden = hidden + layer.self_attn.o_proj(attended)
    return hidden + layer.mlp(layer.post_attention_layernorm(hidden))


def encode_prefix(
    vlm_layers: nn.ModuleList,
    final_norm: nn.Module,
    embeds: torch.Tensor,
    allowed: torch.Tensor,
    positions: torch.Tensor,
    valid: torch.Tensor,
) -> PrefixKV:
    """The prefix ``embeds`` [N, P, W] through every VLM layer (self-attention under ``allowed``
    [N, P, P] at ``positions`` [N, P]), keeping each layer's rotated keys and values."""
    hidden = embeds
    keys, values = [], []
    for layer in vlm_layers:
        query, key, value = project(layer, hidden)
        query, key = rotate(query, positions), rotate(key, positions)
        keys.append(key)
        values.append(value)
        hidden = finish_layer(layer, hidden, attend(query, key, value, allowed))
    return PrefixKV(keys, values, valid, final_norm(hidden[:, -1]))


def run_suffix(
    plans: list[LayerPlan],
    expert_layers: nn.ModuleList,
    final_norm: nn.Module,
    prefix: PrefixKV,
    embeds: torch.Tensor,
) -> torch.Tensor:
    """The suffix ``embeds`` [N, S, We] through the expert against ``prefix``; returns the expert's
    final (normalised) hidden states [N, S, We].

    Suffix tokens attend to every real prefix token and causally to one another (joint layers);
    joint-layer positions continue after the prefix's real tokens, cross-layer positions start at 0."""
    batch, length = embeds.shape[:2]
    device = embeds.device
    steps = torch.arange(length, device=device)
    to_prefix = prefix.valid[:, None, :].expand(batch, length, -1)
    causal = (steps[None, :] <= steps[:, None])[None].expand(batch, -1, -1)
    joint_allowed = torch.cat([to_prefix, causal], dim=-1)
    joint_positions = prefix.valid.sum(-1, keepdim=True) + steps[None, :]
    cross_positions = steps[None, :].expand(batch, -1)
    hidden = embeds
    for plan in plans:
        if plan.expert_index is None:
            continue
        layer = expert_layers[plan.expert_index]
        prefix_keys, prefix_values = prefix.keys[plan.index], prefix.values[plan.index]
        if plan.joint:
            query, key, value = project(layer, hidden)
            query, key = rotate(query, joint_positions), rotate(key, joint_positions)
            keys = torch.cat([prefix_keys, key], dim=1)
            values = torch.cat([prefix_values, value], dim=1)
            attended = attend(query, keys, values, joint_allowed)
        else:
            attention = layer.self_attn
            normed = layer.input_layernorm(hidden)
            query = attention.q_proj(normed).view(batch, length, -1, attention.head_dim)
            query = rotate(query, cross_positions)
            key = attention.k_proj(prefix_keys.flatten(2)).unflatten(-1, (-1, attention.head_dim))
            value = attention.v_proj(prefix_values.flatten(2)).unflatten(-1, (-1, attention.head_dim))
            attended = attend(query, key, value, to_prefix)
        hidden = finish_layer(layer, hidden, attended)
    return final_norm(hidden)
