"""Our observations -> the inputs of transformers' pi0 model.

The prompt of one observation follows ``PI0Processor``: ``image_seq_length`` placeholder tokens
(``image_token_id``) per camera, ``<bos>``, the instruction, ``"\\n"``, then right padding up to the
longest prompt of the batch (masked out; position ids count real tokens only, as ``sample_actions``
computes them). Images are resized to the vision tower's ``image_size`` S and become
``pixel_values`` [N, cameras, 3, S, S] in its range; ``obs["proprio"]`` is normalised and
zero-padded to ``max_state_dim``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PI0Config, PreTrainedTokenizerBase

from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import state_vector
from vla_rl.policies.flow import lerobot_preprocessing as lerobot
from vla_rl.policies.flow.chunk_padding import pad_last_dim
from vla_rl.policies.flow.pi0_config import Pi0PolicyConfig
from vla_rl.policies.vla.prompt import instruction_rows, pad_rows, preprocess_images


@dataclass
class Pi0Inputs:
    """Prefix inputs of a batch plus the padded state."""

    input_ids: torch.Tensor
    """int64 [N, L]: image placeholders, ``<bos>`` instruction ``\\n``, padding."""
    attention_mask: torch.Tensor
    """int64 [N, L]: 1 for real tokens."""
    pixel_values: torch.Tensor
    """float [N, cameras, 3, S, S]."""
    pixel_attention_mask: torch.Tensor
    """bool [N, cameras] (all True: every observation has every camera)."""
    state: torch.Tensor
    """float [N, max_state_dim]."""


def prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    instructions: list[str],
    image_token_id: int,
    num_image_tokens: int,
    max_instruction_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids [N, L], attention_mask [N, L]) with right padding."""
    rows = instruction_rows(tokenizer, instructions, max_instruction_tokens)
    return pad_rows(
        [[image_token_id] * num_image_tokens + row for row in rows], tokenizer.pad_token_id, left=False
    )


def build_inputs(
    obs: Observation,
    cfg: Pi0PolicyConfig,
    model_config: PI0Config,
    tokenizer: PreTrainedTokenizerBase,
    device: torch.device,
) -> Pi0Inputs:
    """All model inputs of one observation batch (a LeRobot import's preprocessing when
    ``cfg.lerobot`` is set, see ``lerobot_preprocessing``)."""
    vision = model_config.vlm_config.vision_config
    image_token_id = model_config.vlm_config.image_token_id
    if cfg.lerobot is not None:
        pixel_values = lerobot.lerobot_pixel_values(obs, cfg.lerobot, device)
    else:
        pixel_values = preprocess_images(
            obs, cfg.camera_keys, vision.image_size, cfg.image_mean, cfg.image_std, device
        )
    batch, cameras = pixel_values.shape[:2]
    num_image_tokens = (vision.image_size // vision.patch_size) ** 2 * cameras  # one per patch
    state = build_state(obs, batch, cfg, model_config, device)
    if cfg.lerobot is not None:
        prompt_state = lerobot.prompt_state(observed_state(obs, batch, cfg, device), cfg.lerobot)
        instructions = list(obs["instruction"])
        text_ids, text_mask = lerobot.lerobot_prompt(tokenizer, instructions, cfg.lerobot, prompt_state)
        ids = torch.cat([torch.full((batch, num_image_tokens), image_token_id), text_ids], dim=1)
        mask = torch.cat([torch.ones(batch, num_image_tokens, dtype=torch.long), text_mask], dim=1)
    else:
        ids, mask = prompt_ids(
            tokenizer, obs["instruction"], image_token_id, num_image_tokens, cfg.max_instruction_tokens
        )
    return Pi0Inputs(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        pixel_values=pixel_values,
        pixel_attention_mask=torch.ones(batch, cameras, dtype=torch.bool, device=device),
        state=state,
    )


def build_state(
    obs: Observation, batch: int, cfg: Pi0PolicyConfig, model_config: PI0Config, device: torch.device
) -> torch.Tensor:
    """float [batch, max_state_dim]: the normalised, padded state (zeros when a state key is
    missing)."""
    proprio = observed_state(obs, batch, cfg, device)
    if cfg.lerobot is not None:
        return lerobot.normalized_state(proprio, cfg.lerobot)
    return pad_last_dim(
        cfg.state_stats.normalize(proprio.float()), model_config.max_state_dim, "policy.state_keys"
    )


def observed_state(obs: Observation, batch: int, cfg: Pi0PolicyConfig, device: torch.device) -> torch.Tensor:
    """The observation's state vector [batch, D] (width 0 when a state key is missing)."""
    if all(key in obs for key in cfg.state_keys):
        return state_vector(obs, cfg.state_keys, device, cfg.proprio_fields)
    return torch.zeros(batch, 0, device=device)


@contextmanager
def unreduced_loss(config: Any) -> Iterator[None]:
    """Within the block, transformers' PI0 (``config``: its model config) returns the flow-matching
    loss per entry instead of its mean, so padded chunk steps and action dims can be masked out."""
    saved = config.loss_reduction
    config.loss_reduction = "none"
    try:
        yield
    finally:
        config.loss_reduction = saved
