"""Tiny randomly initialised reward-model checkpoints for tests and benchmarks.

Each builder writes a complete local model directory with ``save_pretrained`` (weights, config,
tokenizer, image processor), so the code under test loads it exactly as it would load a real
checkpoint: ``from_pretrained(directory, local_files_only=True)``. The tokenizers are word-level
vocabularies over the given instructions and work offline.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel
from transformers import (
    CLIPConfig,
    CLIPImageProcessorPil,
    CLIPModel,
    PreTrainedTokenizerFast,
    SiglipConfig,
    SiglipImageProcessorPil,
    SiglipModel,
)

CONTRASTIVE_FAMILIES = ("clip", "siglip")
DEFAULT_INSTRUCTIONS = (
    "pick up the red cube and place it on the green pad",
    "push the cube onto the target",
    "the red cube is on the pad",
    "the red cube is not on the pad",
    "a robot arm on a table",
)

_PAD, _BOS, _EOS, _UNK = "<pad>", "<bos>", "<eos>", "<unk>"


def word_level_tokenizer(texts: Iterable[str], add_bos: bool) -> PreTrainedTokenizerFast:
    """Lower-cased word/punctuation vocabulary over ``texts`` that appends ``<eos>`` to every text
    (and puts ``<bos>`` first when ``add_bos``), as CLIP's and SigLIP's own tokenizers do: both text
    towers pool the hidden state at the end-of-text token."""
    words = sorted({word for text in texts for word in re.findall(r"\w+|[^\w\s]", text.lower())})
    vocab = {token: index for index, token in enumerate((_PAD, _BOS, _EOS, _UNK, *words))}
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token=_UNK))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    single = f"{_BOS} $A {_EOS}" if add_bos else f"$A {_EOS}"
    backend.post_processor = processors.TemplateProcessing(
        single=single, special_tokens=[(_BOS, vocab[_BOS]), (_EOS, vocab[_EOS])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=_BOS,
        eos_token=_EOS,
        pad_token=_PAD,
        unk_token=_UNK,
        padding_side="right",
    )


def build_tiny_contrastive(
    directory: str | Path,
    family: str = "clip",
    image_size: int = 32,
    patch_size: int = 8,
    instructions: Iterable[str] = DEFAULT_INSTRUCTIONS,
    hidden_size: int = 32,
    num_layers: int = 2,
    max_text_length: int = 32,
    seed: int = 0,
) -> Path:
    """Write a tiny random CLIP (``family="clip"``) or SigLIP (``"siglip"``) model, its tokenizer
    and its image processor into ``directory``; returns the directory.

    ``instructions`` make up the tokenizer's vocabulary (other words map to ``<unk>``).
    """
    if family not in CONTRASTIVE_FAMILIES:
        raise ValueError(f"family must be one of {CONTRASTIVE_FAMILIES}, got {family!r}")
    if image_size % patch_size:
        raise ValueError(f"image_size {image_size} is not a multiple of patch_size {patch_size}")
    directory = Path(directory)
    tokenizer = word_level_tokenizer(instructions, add_bos=family == "clip")
    tower = {
        "hidden_size": hidden_size,
        "intermediate_size": 2 * hidden_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": 2,
    }
    text = {
        **tower,
        "vocab_size": len(tokenizer),
        "max_position_embeddings": max_text_length,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }
    vision = {**tower, "image_size": image_size, "patch_size": patch_size}
    torch.manual_seed(seed)
    if family == "clip":
        model = CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=hidden_size))
        processor = CLIPImageProcessorPil(
            size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
        )
    else:
        model = SiglipModel(SiglipConfig(text_config=text, vision_config=vision))
        with torch.no_grad():
            # SigLIP's training initialisation (temperature 10, bias -10) rather than zeros.
            model.logit_scale.fill_(math.log(10.0))
            model.logit_bias.fill_(-10.0)
        processor = SiglipImageProcessorPil(size={"height": image_size, "width": image_size})
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory
