"""Token VLA policies on a PaliGemma backbone: autoregressive (``token_vla``) and parallel (``chunk_vla``)."""

from vla_rl.policies.vla.action_tokenizer import ActionTokenizer
from vla_rl.policies.vla.chunk_vla import ChunkVLA
from vla_rl.policies.vla.config import LoraSettings, TokenVLAConfig, tiny_paligemma_config
from vla_rl.policies.vla.text_tokenizer import build_text_tokenizer
from vla_rl.policies.vla.token_vla import TokenVLA

__all__ = [
    "ActionTokenizer",
    "ChunkVLA",
    "LoraSettings",
    "TokenVLA",
    "TokenVLAConfig",
    "build_text_tokenizer",
    "tiny_paligemma_config",
]
