"""PaliGemma backbone + tokenizer: construction, local loading, LoRA, freezing and saving.

Everything loads through the real ``from_pretrained`` code with ``local_files_only=True``: a
directory written by ``save_pretrained`` (ours or a downloaded PaliGemma checkpoint), never a hub.
"""

from __future__ import annotations

from pathlib import Path

from peft import PeftModel
from transformers import PaliGemmaForConditionalGeneration, PreTrainedTokenizerBase

from vla_rl.policies.lora import base_state_dict, without_peft_deprecation_warning
from vla_rl.policies.pretrained_io import local_dir
from vla_rl.policies.vla.config import tiny_paligemma_config
from vla_rl.policies.vla.text_tokenizer import (
    IMAGE_TOKEN,
    TOKENIZER_DIR,
    build_text_tokenizer,
    load_local_tokenizer,
)

BACKBONE_DIR = "backbone"
ADAPTER_DIR = "lora_adapter"

Backbone = PaliGemmaForConditionalGeneration | PeftModel


def build_tiny_backbone(
    instructions: list[str] | None = None, num_action_tokens: int = 256, **config_overrides: int
) -> tuple[PaliGemmaForConditionalGeneration, PreTrainedTokenizerBase]:
    """Randomly initialised tiny PaliGemma with the offline word tokenizer (vocab = words + actions)."""
    tokenizer = build_text_tokenizer(instructions, num_action_tokens=num_action_tokens)
    config = tiny_paligemma_config(
        vocab_size=len(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **config_overrides,
    )
    return PaliGemmaForConditionalGeneration(config), tokenizer


def load_local_backbone(
    directory: str | Path,
) -> tuple[PaliGemmaForConditionalGeneration, PreTrainedTokenizerBase]:
    """PaliGemma weights and tokenizer from a local directory (``local_files_only=True``)."""
    directory = local_dir(directory)
    model = PaliGemmaForConditionalGeneration.from_pretrained(directory, local_files_only=True)
    return model, load_local_tokenizer(directory)


def unwrap(backbone: Backbone) -> PaliGemmaForConditionalGeneration:
    """The PaliGemma module (LoRA layers, when present, are injected into it in place)."""
    return backbone.get_base_model() if isinstance(backbone, PeftModel) else backbone


def freeze_vision(model: PaliGemmaForConditionalGeneration) -> None:
    for module in (model.model.vision_tower, model.model.multi_modal_projector):
        for parameter in module.parameters():
            parameter.requires_grad_(False)


def save_backbone(backbone: Backbone, tokenizer: PreTrainedTokenizerBase, directory: str | Path) -> None:
    """``backbone/`` (safetensors via ``save_pretrained``), ``lora_adapter/`` when LoRA, ``tokenizer/``."""
    directory = Path(directory)
    model = unwrap(backbone)
    if isinstance(backbone, PeftModel):
        model.save_pretrained(directory / BACKBONE_DIR, state_dict=base_state_dict(model))
        backbone.save_pretrained(directory / ADAPTER_DIR, save_embedding_layers=False)
    else:
        model.save_pretrained(directory / BACKBONE_DIR)
    tokenizer.save_pretrained(directory / TOKENIZER_DIR)


def load_saved_backbone(directory: str | Path, with_lora: bool) -> tuple[Backbone, PreTrainedTokenizerBase]:
    """Inverse of ``save_backbone``."""
    directory = Path(directory)
    model = PaliGemmaForConditionalGeneration.from_pretrained(directory / BACKBONE_DIR, local_files_only=True)
    tokenizer = load_local_tokenizer(directory)
    if with_lora:
        with without_peft_deprecation_warning():
            adapted = PeftModel.from_pretrained(model, directory / ADAPTER_DIR, is_trainable=True)
        return adapted, tokenizer
    return model, tokenizer
