"""Supervised fine-tuning (``vla-rl sft``) of chunk policies on demonstrations."""

from vla_rl.training.sft.chunk_sampler import ChunkBatch, ChunkSampler, chunk_indices
from vla_rl.training.sft.config import (
    SFTConfig,
    SFTDataConfig,
    SFTEvalConfig,
    SFTOptimConfig,
    SFTPolicyConfig,
)
from vla_rl.training.sft.config_load import compose_sft_config, load_sft_config_file, validate_sft_config
from vla_rl.training.sft.trainer import SFTResult, SFTTrainer

__all__ = [
    "ChunkBatch",
    "ChunkSampler",
    "SFTConfig",
    "SFTDataConfig",
    "SFTEvalConfig",
    "SFTOptimConfig",
    "SFTPolicyConfig",
    "SFTResult",
    "SFTTrainer",
    "chunk_indices",
    "compose_sft_config",
    "load_sft_config_file",
    "validate_sft_config",
]
