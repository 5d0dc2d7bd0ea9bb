"""Low-rank adapters (``peft``) on a policy's pretrained model, for every family that fine-tunes one.

A target name that matches no module of the model is a ``ConfigError`` before training, naming the
name and the linear layers the model does have: ``peft`` itself accepts a list as long as one name
matches, so a misspelt or foreign name (``lm_head`` on a model without one) would otherwise leave
those layers without adapters and the run would train less than asked, silently.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from torch import nn

from vla_rl.config.structured import ConfigError

TARGETS_KEY = "policy.lora.target_modules"


@dataclass
class LoraSettings:
    """Low-rank adapters (``peft``) on the backbone; the base weights stay frozen."""

    rank: int = 8
    """Rank r of the A (r x in) and B (out x r) adapter matrices."""
    alpha: float = 16.0
    """Scale numerator: the adapter output is multiplied by ``alpha / rank``."""
    dropout: float = 0.0
    """Dropout on the adapter input."""
    target_modules: list[str] | None = None
    """Names of the model's modules that get adapters, matched as ``peft`` does: a module whose
    dotted name is the target or ends in ``.<target>``. Every name must match at least one module.
    None: the family's default (its attention and MLP projections; see ``PALIGEMMA_LORA_TARGETS``
    and ``PI0_LORA_TARGETS``)."""

    def targets(self, default: Sequence[str]) -> list[str]:
        """``target_modules``, or ``default`` when it is None."""
        return list(default if self.target_modules is None else self.target_modules)


def check_lora_targets(model: nn.Module, target_modules: list[str]) -> None:
    """``ConfigError`` naming each target that matches no module of ``model``."""
    names = [name for name, _ in model.named_modules() if name]
    unmatched = [
        target
        for target in target_modules
        if not any(name == target or name.endswith(f".{target}") for name in names)
    ]
    if unmatched:
        linear = {
            name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, nn.Linear)
        }
        raise ConfigError(
            f"{TARGETS_KEY}: {unmatched} match no module of the {type(model).__name__}; its linear "
            f"layers are named {sorted(linear)}"
        )


@contextmanager
def without_peft_deprecation_warning() -> Iterator[None]:
    """peft 0.21.2 (the newest release) reads transformers' deprecated ``is_gradient_checkpointing``
    alias whenever it wraps a model (``get_peft_model``, ``PeftModel.from_pretrained``): inside this
    block that one warning, which is peft's to fix, is not shown; every other warning is."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`is_gradient_checkpointing` is deprecated", FutureWarning)
        yield


def apply_lora(
    model: nn.Module,
    settings: LoraSettings,
    default_targets: Sequence[str],
    trained_in_full: Sequence[str] = (),
) -> PeftModel:
    """Wrap ``model`` with ``peft`` adapters on ``settings``' targets (``default_targets`` when it
    names none; each checked to match); the base weights get ``requires_grad=False`` except those
    whose names start with one of ``trained_in_full``, which keep training beside the adapters."""
    targets = settings.targets(default_targets)
    check_lora_targets(model, targets)
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=targets,
        bias="none",
        # a tied output head and input embedding get one adapter, so the two stay one matrix
        ensure_weight_tying=bool(getattr(model, "_tied_weights_keys", None)),
    )
    with without_peft_deprecation_warning():
        wrapped = get_peft_model(model, config)
    for name, parameter in model.named_parameters():
        if name.startswith(tuple(trained_in_full)):
            parameter.requires_grad_(True)
    return wrapped


def base_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s weights without adapters, under the names the model has without LoRA (what its
    ``save_pretrained`` writes and ``from_pretrained`` reads)."""
    state = {}
    for name, tensor in model.state_dict().items():
        if "lora_" in name:
            continue
        state[name.replace(".base_layer.", ".")] = tensor
    return state


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapter weights injected into ``model`` (``lora_A`` / ``lora_B``), under their own names."""
    return {name: tensor for name, tensor in model.state_dict().items() if "lora_" in name}


def load_adapter_state_dict(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Load ``adapter_state_dict``'s output into a model with the same adapters; every adapter
    weight must be given and every given one must exist."""
    missing = set(adapter_state_dict(model)) - set(state)
    unexpected = set(state) - set(adapter_state_dict(model))
    if missing or unexpected:
        raise ValueError(
            f"adapter weights do not fit the model: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
    model.load_state_dict(state, strict=False)


def merged_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s weights with its LoRA adapters merged in, under the names the model has without
    LoRA (``base_state_dict``'s); ``model`` itself is not changed. Each adapted layer's weight becomes
    ``W + delta`` with ``delta`` from peft's own ``get_delta_weight`` (``B A alpha / r`` for a linear
    layer), summed over the active adapters, computed in float32 and cast to ``W``'s dtype."""
    from peft.tuners.lora import LoraLayer

    state = base_state_dict(model)
    with torch.no_grad():
        for name, module in model.named_modules():
            if not isinstance(module, LoraLayer):
                continue
            key = f"{name}.weight"
            base = state[key]
            delta = sum(module.get_delta_weight(adapter).float() for adapter in module.active_adapters)
            state[key] = (base.float() + delta).to(base.dtype)
    return state


def lora_layer_names(model: nn.Module) -> list[str]:
    """The dotted names of ``model``'s modules that carry LoRA adapters."""
    from peft.tuners.lora import LoraLayer

    return [name for name, module in model.named_modules() if isinstance(module, LoraLayer)]
