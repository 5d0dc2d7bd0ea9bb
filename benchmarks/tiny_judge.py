"""A tiny random PaliGemma judge written to disk, so tests load it through the real loading code.

The directory holds what ``save_pretrained`` writes for a real checkpoint: the model weights and
config, and a ``PaliGemmaProcessor`` (SigLIP image processor + the offline word tokenizer of
``vla_rl.policies.vla.text_tokenizer``). Its vocabulary holds the words of the judge's default
questions, ``yes`` and ``no`` (one token each) and the given instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from transformers import PaliGemmaForConditionalGeneration, PaliGemmaProcessor, SiglipImageProcessorPil

from vla_rl.policies.vla.config import tiny_paligemma_config
from vla_rl.policies.vla.text_tokenizer import build_text_tokenizer, default_instruction_corpus
from vla_rl.rewards.vlm_judge import DEFAULT_PROGRESS_QUESTION, DEFAULT_QUESTION, INSTRUCTION_FIELD


def build_tiny_judge(
    directory: str | Path,
    image_size: int = 32,
    instructions: Sequence[str] | None = None,
    patch_size: int = 8,
    **config_overrides: int,
) -> Path:
    """Save a random tiny PaliGemma and its processor into ``directory`` and return it.

    ``instructions`` (default: the built-in task instructions) join the vocabulary; words outside
    it become ``<unk>``. ``config_overrides`` go to ``tiny_paligemma_config`` (e.g. ``num_layers``).
    """
    questions = [q.replace(INSTRUCTION_FIELD, " ") for q in (DEFAULT_QUESTION, DEFAULT_PROGRESS_QUESTION)]
    corpus = [*questions, "yes no", *(instructions or default_instruction_corpus())]
    tokenizer = build_text_tokenizer(corpus, num_action_tokens=0)
    image_processor = SiglipImageProcessorPil(
        size={"height": image_size, "width": image_size},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.5, 0.5, 0.5],
        image_seq_length=(image_size // patch_size) ** 2,
    )
    # The processor adds PaliGemma's location and segmentation tokens to the tokenizer, so the
    # model's vocabulary is sized after it is built.
    processor = PaliGemmaProcessor(image_processor=image_processor, tokenizer=tokenizer)
    config = tiny_paligemma_config(
        vocab_size=len(processor.tokenizer),
        image_token_id=processor.image_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        image_size=image_size,
        patch_size=patch_size,
        **config_overrides,
    )
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    PaliGemmaForConditionalGeneration(config).save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory
