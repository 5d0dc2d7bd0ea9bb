"""A word-level tokenizer with the Llama-2 vocabulary *layout* that OpenVLA folders rely on, built
offline (imported by the tests and by ``make_openvla_folder.py`` in the reference environment).

32000 ids like Llama-2's: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, the words of ``WORDS`` from 3, ``▁`` at
29871 (the id OpenVLA appends after ``Out:``), fillers elsewhere; ``<PAD>`` added as id 32000 as
OpenVLA's tokenizer has it. The last 256 ids (31744..31999) are the action tokens. Encoding adds
``<s>`` in front, as Llama's tokenizer does.
"""

from __future__ import annotations

import json
from pathlib import Path

VOCAB_SIZE = 32000
EMPTY_TOKEN = "\u2581"
EMPTY_TOKEN_ID = 29871
WORDS = [
    "In",
    ":",
    "What",
    "action",
    "should",
    "the",
    "robot",
    "take",
    "to",
    "?",
    "Out",
    "pick",
    "up",
    "red",
    "cube",
    "push",
    "blue",
    "block",
    "open",
    "drawer",
    "put",
    "on",
    "plate",
    "lift",
]


def build_tokenizer(directory: str | Path) -> None:
    """Write the tokenizer (``tokenizer.json`` + config) into ``directory``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for word in WORDS:
        vocab.setdefault(word, len(vocab))
    filler = 0
    for token_id in range(len(vocab), VOCAB_SIZE):
        if token_id == EMPTY_TOKEN_ID:
            vocab[EMPTY_TOKEN] = token_id
        else:
            vocab[f"<x{filler}>"] = token_id
            filler += 1
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_input_names=["input_ids", "attention_mask"],
    )
    wrapped.add_special_tokens({"pad_token": "<PAD>"})
    wrapped.save_pretrained(str(directory))
    config_file = Path(directory) / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["tokenizer_class"] = "PreTrainedTokenizerFast"  # a name transformers 4 and 5 both know
    config_file.write_text(json.dumps(config, indent=2))
