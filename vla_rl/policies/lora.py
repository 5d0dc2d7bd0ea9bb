"""Low-rank adapters (``peft``) on a policy's pretrained model, for every family that fine-tunes one.

A target name that matches no module of the model is a ``ConfigError`` before training, naming the
name and the linear layers the model does have: ``peft`` itself accepts a list as long as one name
matches, so a misspelt or foreign name (``lm_head`` on a model without one) would otherwise leave
those layers without adapters and the run would train less than asked, silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    target_modules: list[str] = field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
            "lm_head",
        ]
    )
    """Names of the backbone's linear layers that get adapters (Gemma and SigLIP projections), matched
    as ``peft`` does: a module whose dotted name is the target or ends in ``.<target>``. The
    PaliGemma families' output head is included so that the action-bin logits can move: its weights
    are tied to the frozen input embeddings, and without an adapter the reachable logit range stays
    that of the pretrained (or freshly initialised) vocabulary. The tied input embedding gets the
    same adapter (peft's ``ensure_weight_tying``), so the two stay one matrix. Every name must
    match at least one module of the model."""


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


def apply_lora(model: nn.Module, settings: LoraSettings) -> PeftModel:
    """Wrap ``model`` with ``peft`` adapters on ``settings.target_modules`` (each checked to match);
    the base weights get ``requires_grad=False``."""
    check_lora_targets(model, list(settings.target_modules))
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        bias="none",
        ensure_weight_tying=True,
    )
    return get_peft_model(model, config)
