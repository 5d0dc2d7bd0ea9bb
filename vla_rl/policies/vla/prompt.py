"""Observation -> prompt pieces for a PaliGemma backbone: pixel tensors and instruction token ids.

The prompt of one observation is laid out as PaliGemma's processor does it,
``[image tokens of each camera] [state embeddings, optional] <bos> instruction \\n``, followed by
the action tokens (or action slots). Instructions of a batch differ in length; they are padded on
the left of the *text* part, so padding can sit between the image tokens and ``<bos>``. That is
harmless: padded positions are excluded by the attention mask and position ids are the running
count of real tokens (1-indexed as in PaliGemma), so each row computes exactly what it would
compute alone, and the last prompt position is always the separator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from vla_rl.envs.base import Observation

PROMPT_SEPARATOR = "\n"


@dataclass
class Prompt:
    """Embedded prompts of a batch, ready to be extended with action tokens."""

    embeds: torch.Tensor
    """float [N, L, hidden]."""
    attention_mask: torch.Tensor
    """int64 [N, L]: 1 for real tokens, 0 for padding."""
    position_ids: torch.Tensor
    """int64 [N, L]: 1-indexed positions counting real tokens only."""

    @property
    def length(self) -> int:
        return int(self.embeds.shape[1])

    @property
    def next_position(self) -> torch.Tensor:
        """int64 [N]: position of the first token after the prompt (its last token is never padding)."""
        return self.position_ids[:, -1] + 1


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """1-indexed running count of real tokens; padded slots get the count so far (unused)."""
    return attention_mask.long().cumsum(dim=-1).clamp(min=1)


def preprocess_images(
    obs: Observation, camera_keys: list[str], image_size: int, mean: float, std: float, device: torch.device
) -> torch.Tensor:
    """uint8 ``obs["rgb_<cam>"]`` [N, H, W, 3] per camera -> float [N * cameras, 3, S, S].

    Images of one observation are consecutive (observation-major), matching the order in which
    their image tokens appear in the prompt.
    """
    per_camera = []
    for camera in camera_keys:
        key = f"rgb_{camera}"
        if key not in obs:
            raise KeyError(
                f"observation has no {key!r} (available: {sorted(k for k in obs if k.startswith('rgb_'))})"
            )
        images = torch.as_tensor(obs[key], device=device).permute(0, 3, 1, 2).float() / 255.0
        if images.shape[-2:] != (image_size, image_size):
            images = F.interpolate(images, size=(image_size, image_size), mode="bilinear", antialias=True)
        per_camera.append((images - mean) / std)
    stacked = torch.stack(per_camera, dim=1)
    return stacked.flatten(0, 1)


def tokenize_instructions(
    tokenizer: PreTrainedTokenizerBase, instructions: list[str], max_tokens: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``<bos> words \\n`` per instruction, left-padded: (ids [N, T], attention_mask [N, T])."""
    separator = tokenizer(PROMPT_SEPARATOR, add_special_tokens=False)["input_ids"]
    words = tokenizer(list(instructions), add_special_tokens=False)["input_ids"]
    rows = [[tokenizer.bos_token_id, *ids[:max_tokens], *separator] for ids in words]
    width = max(len(row) for row in rows)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        mask[index, width - len(row) :] = 1
    return ids.to(device), mask.to(device)
