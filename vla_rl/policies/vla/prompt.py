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
from vla_rl.policies.vla.text_tokenizer import PROMPT_SEPARATOR


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

    def followed_by(self, embeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The prompt followed by ``embeds`` [N, T, hidden] (real tokens at the next positions):
        (embeds [N, L + T, hidden], attention mask [N, L + T], position ids [N, L + T])."""
        batch, count = embeds.shape[:2]
        mask = torch.cat([self.attention_mask, self.attention_mask.new_ones(batch, count)], dim=1)
        offsets = torch.arange(count, device=embeds.device)
        positions = torch.cat([self.position_ids, self.next_position[:, None] + offsets], dim=1)
        return torch.cat([self.embeds, embeds], dim=1), mask, positions


def positions_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """1-indexed running count of real tokens; padded slots get the count so far (unused)."""
    return attention_mask.long().cumsum(dim=-1).clamp(min=1)


def preprocess_images(
    obs: Observation, camera_keys: list[str], image_size: int, mean: float, std: float, device: torch.device
) -> torch.Tensor:
    """uint8 ``obs["rgb_<cam>"]`` [N, H, W, 3] per camera -> float [N, cameras, 3, S, S]: resized to
    S = ``image_size`` and normalised as ``(x / 255 - mean) / std`` (the VLAs and pi0 alike)."""
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
    return torch.stack(per_camera, dim=1)


def instruction_rows(
    tokenizer: PreTrainedTokenizerBase, instructions: list[str], max_tokens: int
) -> list[list[int]]:
    """``<bos> words \\n`` token ids per instruction, its words truncated to ``max_tokens``."""
    separator = tokenizer(PROMPT_SEPARATOR, add_special_tokens=False)["input_ids"]
    words = tokenizer(list(instructions), add_special_tokens=False)["input_ids"]
    bos = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    return [bos + ids[:max_tokens] + separator for ids in words]


def pad_rows(rows: list[list[int]], pad_id: int | None, left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows padded to the longest with ``pad_id`` (None: 0) on the left or the right:
    (ids [N, L], attention_mask [N, L])."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id if pad_id is not None else 0, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for index, row in enumerate(rows):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        ids[index, span] = torch.tensor(row, dtype=torch.long)
        mask[index, span] = 1
    return ids, mask


def tokenize_instructions(
    tokenizer: PreTrainedTokenizerBase, instructions: list[str], max_tokens: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """``<bos> words \\n`` per instruction, left-padded: (ids [N, T], attention_mask [N, T])."""
    ids, mask = pad_rows(
        instruction_rows(tokenizer, instructions, max_tokens), tokenizer.pad_token_id, left=True
    )
    return ids.to(device), mask.to(device)
