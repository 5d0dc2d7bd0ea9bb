"""Activation checkpointing of a model's transformer layers that also works in eval mode.

A checkpointed layer keeps only its inputs in the forward pass and runs again in the backward pass
to rebuild what its gradient needs (``torch.utils.checkpoint``, non-reentrant): less memory for the
update, one more forward pass of the layers in compute, the same numbers.

transformers' own switch (``gradient_checkpointing_enable``) acts only while a layer is in train
mode, and RL runs its policies in eval mode (sampling, recomputing log-probabilities and training
without dropout), where it would do nothing. So this wraps each layer's ``forward`` instead. A call
that passes a KV cache, or asks for one, runs plainly: the layer writes the cache, and running it
again would write it twice. The teacher-forced passes of the token VLAs' updates use no cache; their
sampling runs without gradients, which is never checkpointed either.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers.modeling_layers import GradientCheckpointingLayer


def checkpoint_transformer_layers(model: nn.Module) -> int:
    """Checkpoint every transformer layer of ``model`` (transformers' ``GradientCheckpointingLayer``:
    the decoder layers of a language model, the encoder layers of a vision tower); returns how many.
    Calling it twice changes nothing. The state dict and saved checkpoints are unchanged."""
    layers = [module for module in model.modules() if isinstance(module, GradientCheckpointingLayer)]
    for layer in layers:
        if "forward" not in vars(layer):  # not wrapped yet
            layer.forward = functools.partial(_checkpointed, layer.forward)
    return len(layers)


def _checkpointed(forward: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    uses_cache = kwargs.get("use_cache") or any(
        kwargs.get(name) is not None for name in ("cache", "past_key_values", "past_key_value")
    )
    if torch.is_grad_enabled() and not uses_cache:
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)
    return forward(*args, **kwargs)
