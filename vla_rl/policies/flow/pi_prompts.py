"""The prompts of pi0 / pi0.5 and openpi's own input steps, shared by the LeRobot and openpi imports
(``lerobot_preprocessing``): the task text cleaned, pi0.5's discretised state, openpi's tokenisation
and its image resizing."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from vla_rl.policies.image_resize import resize_with_pad_pil

PROMPT_END = "\n"
"""pi0's prompt ends with a newline (LeRobot's ``Pi0NewLineProcessor``, openpi's tokenizer)."""
STATE_BINS = 256
"""pi0.5 writes each state value as one of this many bins."""


def clean_task(text: str) -> str:
    """The task as both pi0.5 prompts and openpi write it: stripped, underscores and newlines as spaces."""
    return text.strip().replace("_", " ").replace("\n", " ")


def openpi_pixel_values(frames: Any, height: int, width: int, device: torch.device) -> torch.Tensor:
    """float [N, 3, height, width] in [-1, 1] from frames [N, H, W, 3] as openpi preprocesses them:
    float frames become uint8 as ``255 x`` truncated (openpi's image parsing), PIL's resize with
    padding unless already ``height`` x ``width``, then ``x / 255 * 2 - 1``."""
    if isinstance(frames, torch.Tensor):
        frames = frames.detach().cpu().numpy()
    frames = np.asarray(frames)
    if np.issubdtype(frames.dtype, np.floating):
        frames = (255 * frames).astype(np.uint8)
    frames = resize_with_pad_pil(frames, height, width)
    images = torch.as_tensor(frames, device=device).to(torch.float32) / 255.0 * 2.0 - 1.0
    return images.permute(0, 3, 1, 2)


def state_bins(state: torch.Tensor) -> np.ndarray:
    """int [N, D]: each normalised value's bin 0..255 of 256 equal bins over [-1, 1] (values below -1
    give -1, above 1 give 255, as ``np.digitize`` does)."""
    edges = np.linspace(-1, 1, STATE_BINS + 1)[:-1]
    return np.digitize(state.detach().cpu().numpy(), bins=edges) - 1


def pi05_prompts(instructions: list[str], state: torch.Tensor) -> list[str]:
    """pi0.5's prompts: the task and the discretised normalised state [N, max_state_dim]."""
    prompts = []
    for text, bins in zip(instructions, state_bins(state), strict=True):
        prompts.append(f"Task: {clean_task(text)}, State: {' '.join(map(str, bins))};\nAction: ")
    return prompts


def openpi_prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    instructions: list[str],
    policy_type: str,
    length: int,
    state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """openpi's ``PaligemmaTokenizer.tokenize`` of each instruction (pi0.5: with ``state``, the
    normalised state at the robot's width): ids and mask [N, length], padded with 0."""
    ids = torch.zeros(len(instructions), length, dtype=torch.long)
    mask = torch.zeros(len(instructions), length, dtype=torch.long)
    pi05 = pi05_prompts(instructions, state) if policy_type == "pi05" else None
    for row, text in enumerate(instructions):
        if pi05 is not None:
            tokens = tokenizer(pi05[row])["input_ids"]
        else:
            task = clean_task(text)
            tokens = (
                tokenizer(task)["input_ids"] + tokenizer(PROMPT_END, add_special_tokens=False)["input_ids"]
            )
        tokens = tokens[:length]
        ids[row, : len(tokens)] = torch.as_tensor(tokens, dtype=torch.long)
        mask[row, : len(tokens)] = 1
    return ids, mask
