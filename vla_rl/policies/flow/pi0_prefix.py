"""pi0's prefix (images + instruction through the VLM) as a reusable cache.

Every denoising step attends to the same prefix, so the policy computes its keys and values once per
observation batch (``PrefixCache``). Two further reuses live here:

* ``repeat_prefix``: one batched velocity call for all K steps of stored chains (the PPO/GRPO
  recomputation), where each row's prefix is repeated K times instead of run K times.
* ``prefix_rows`` / ``prefix_from_rows``: when the VLM is frozen, the prefix of an observation never
  changes during training, so an update stores it per row (``ChunkPolicy.observation_cache``) and every
  epoch reuses it instead of running the vision tower and the Gemma prefix again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

PREFIX_KEYS = "prefix_keys"
"""float [N, layers, kv_heads, L, head_dim] in ``sample_info``: the prefix's keys per row."""
PREFIX_VALUES = "prefix_values"
"""float [N, layers, kv_heads, L, head_dim]: the prefix's values per row."""
PREFIX_MASK = "prefix_mask"
"""int64 [N, L]: the real prefix tokens (prompts are right-padded; zero columns are padding)."""


@dataclass
class PrefixCache:
    """The observation part of pi0, computed once and reused by every denoising step."""

    key_values: DynamicCache
    """Keys/values of the prefix (images + instruction) in every layer; velocity calls append the
    action tokens and crop back to ``prefix_length``."""
    attention_mask: torch.Tensor
    """int64 [N, L]: real prefix tokens."""
    prefix_length: int
    """L."""
    state: torch.Tensor
    """float [N, max_state_dim]: normalised, padded proprioception."""


def cache_from_tensors(keys: list[torch.Tensor], values: list[torch.Tensor]) -> DynamicCache:
    """A fresh ``DynamicCache`` holding ``keys[i]``/``values[i]`` [N, kv_heads, L, head_dim] in layer i."""
    cache = DynamicCache()
    for layer, (key, value) in enumerate(zip(keys, values, strict=True)):
        cache.update(key, value, layer)
    return cache


def layer_tensors(prefix: PrefixCache) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The prefix's keys and values, one tensor [N, kv_heads, L, head_dim] per layer."""
    layers = prefix.key_values.layers
    return [layer.keys for layer in layers], [layer.values for layer in layers]


def repeat_prefix(prefix: PrefixCache, repeats: int) -> PrefixCache:
    """Each row ``repeats`` times in a row (row i -> rows i * repeats ... i * repeats + repeats - 1),
    in a new cache: the original is left as it was."""
    keys, values = layer_tensors(prefix)
    return PrefixCache(
        cache_from_tensors(
            [key.repeat_interleave(repeats, 0) for key in keys],
            [value.repeat_interleave(repeats, 0) for value in values],
        ),
        prefix.attention_mask.repeat_interleave(repeats, 0),
        prefix.prefix_length,
        prefix.state.repeat_interleave(repeats, 0),
    )


def prefix_rows(prefix: PrefixCache) -> dict[str, torch.Tensor]:
    """The prefix as per-row tensors for ``sample_info`` (detached)."""
    keys, values = layer_tensors(prefix)
    return {
        PREFIX_KEYS: torch.stack(keys, 1).detach(),
        PREFIX_VALUES: torch.stack(values, 1).detach(),
        PREFIX_MASK: prefix.attention_mask.detach(),
    }


def prefix_from_rows(sample_info: dict[str, torch.Tensor], state: torch.Tensor) -> PrefixCache:
    """Rebuild a ``PrefixCache`` from ``prefix_rows`` output (possibly zero-padded to a longer L by
    concatenation with other batches), trimmed to the longest real prompt among these rows so that the
    action tokens attend to as many positions as with a freshly encoded prefix."""
    mask = sample_info[PREFIX_MASK].to(state.device)
    used = mask.any(0).nonzero()
    length = int(used.max()) + 1 if len(used) else mask.shape[1]
    keys = sample_info[PREFIX_KEYS].to(state.device)[..., :length, :]
    values = sample_info[PREFIX_VALUES].to(state.device)[..., :length, :]
    return PrefixCache(
        cache_from_tensors(list(keys.unbind(1)), list(values.unbind(1))),
        mask[:, :length],
        length,
        state,
    )
