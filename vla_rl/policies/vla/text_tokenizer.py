"""A small word-level text tokenizer that works offline, with the action tokens reserved at the end.

Users of a real PaliGemma checkpoint load its own tokenizer from the checkpoint directory. Tests
and from-scratch models use this one: lower-cased whitespace/punctuation words from the task
instructions plus PaliGemma's special tokens (``<image>`` and a ``"\\n"`` prompt separator), then
``num_action_tokens`` tokens ``<action_k>`` occupying the last ids, so that
``vocab_size = text vocabulary + num_action_tokens`` and the action bins are the last ids.
It is a ``PreTrainedTokenizerFast``: ``save_pretrained(dir)`` then
``AutoTokenizer.from_pretrained(dir, local_files_only=True)`` gives it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.models import WordLevel
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<eos>"
BOS_TOKEN = "<bos>"
UNK_TOKEN = "<unk>"
IMAGE_TOKEN = "<image>"
PROMPT_SEPARATOR = "\n"
"""Ends the prompt (PaliGemma's convention: ``<image>... <bos> instruction \\n``)."""
SPECIAL_TOKENS = (PAD_TOKEN, EOS_TOKEN, BOS_TOKEN, UNK_TOKEN, IMAGE_TOKEN, PROMPT_SEPARATOR)
TOKENIZER_DIR = "tokenizer"
"""Where a policy folder keeps its tokenizer (``save_pretrained``)."""

EXTRA_INSTRUCTION_WORDS = (
    "move the gripper to the target push the cube onto the target pick up the cube "
    "open close grasp lift place put left right up down forward backward red green blue yellow"
)
"""Words of the fixed-phrase tasks and common manipulation verbs/colours."""


def action_token(index: int) -> str:
    return f"<action_{index}>"


def default_instruction_corpus() -> list[str]:
    """Instructions of the built-in tasks (all pick-and-place phrasings and colours included)."""
    from vla_rl.sims.tasks.pick_place import COLOURS, HELDOUT_TEMPLATES, TRAIN_TEMPLATES

    corpus = [EXTRA_INSTRUCTION_WORDS]
    for template in (*TRAIN_TEMPLATES, *HELDOUT_TEMPLATES):
        corpus.extend(template.format(cube=cube, pad=pad) for cube in COLOURS for pad in COLOURS)
    return corpus


def _words(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text.lower())


def build_text_tokenizer(
    corpus: Iterable[str] | None = None, num_action_tokens: int = 256
) -> PreTrainedTokenizerFast:
    """Word-level tokenizer over ``corpus`` (default: the task instructions) + reserved action tokens."""
    words = sorted({word for text in (corpus or default_instruction_corpus()) for word in _words(text)})
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for word in words:
        vocab.setdefault(word, len(vocab))
    for index in range(num_action_tokens):
        vocab[action_token(index)] = len(vocab)
    backend = Tokenizer(WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=UNK_TOKEN,
        additional_special_tokens=[
            IMAGE_TOKEN,
            PROMPT_SEPARATOR,
            *map(action_token, range(num_action_tokens)),
        ],
        padding_side="left",
    )
    return tokenizer


def load_local_tokenizer(directory: Path) -> PreTrainedTokenizerBase:
    """The tokenizer of a local checkpoint: in its ``tokenizer/`` subdirectory or next to the weights."""
    tokenizer_dir = directory / TOKENIZER_DIR if (directory / TOKENIZER_DIR).is_dir() else directory
    return AutoTokenizer.from_pretrained(tokenizer_dir, local_files_only=True)


GENERIC_TOKENIZER_CLASS = "TokenizersBackend"
"""The class name transformers 5 writes for a tokenizer that is a ``tokenizers`` file alone."""
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
"""The name of that same kind of tokenizer that transformers 4 knows too (and 5 still reads)."""


def save_portable_tokenizer(tokenizer: PreTrainedTokenizerBase, directory: Path) -> None:
    """``tokenizer.save_pretrained(directory)``, readable by transformers 4 as well (LeRobot 0.4's):
    transformers 5 names a plain ``tokenizer.json`` tokenizer's class ``TokenizersBackend``, which 4
    does not have; the config then names ``PreTrainedTokenizerFast``, the same tokenizer in both."""
    tokenizer.save_pretrained(directory)
    config_file = Path(directory) / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    if config.get("tokenizer_class") == GENERIC_TOKENIZER_CLASS:
        config["tokenizer_class"] = PORTABLE_TOKENIZER_CLASS
        config_file.write_text(json.dumps(config, indent=2))
