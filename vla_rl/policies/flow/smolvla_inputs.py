"""Our observations -> SmolVLA's model inputs, preprocessed as LeRobot's SmolVLA pipeline does.

* Cameras: each image input of the folder (``observation.images.<name>``, config order) reads
  ``obs["rgb_<camera>"]`` (uint8 [N, H, W, 3]; ``camera_map`` names the camera), scaled to [0, 1],
  normalised as the folder says for ``VISUAL`` features (identity for SmolVLA's default), resized with
  padding to ``resize_imgs_with_padding`` (top/left padding of 0) and mapped to [-1, 1].
* State: ``state_keys`` concatenated, normalised with the folder's ``observation.state`` statistics,
  zero-padded to ``max_state_dim``.
* Instruction: a newline appended unless it ends with one, tokenised with the backbone's tokenizer,
  truncated to ``tokenizer_max_length`` tokens and right-padded (to the longest of the batch or to
  the maximum length, ``pad_language_to``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import state_vector
from vla_rl.policies.flow.chunk_padding import pad_last_dim
from vla_rl.policies.flow.smolvla_config import SmolVLAArchitecture, SmolVLAPolicyConfig
from vla_rl.policies.image_resize import resize_with_pad
from vla_rl.policies.lerobot_folder import LeRobotFolder, normalize

STATE_KEY = "observation.state"
ACTION_KEY = "action"
IMAGE_PREFIX = "observation.images."


@dataclass
class SmolVLAInputs:
    """The model inputs of one observation batch."""

    images: list[torch.Tensor]
    """One float [N, 3, H, W] in [-1, 1] per camera, in the folder's order."""
    tokens: torch.Tensor
    """int64 [N, T]: the instruction's token ids (right-padded)."""
    token_mask: torch.Tensor
    """bool [N, T]: real tokens."""
    state: torch.Tensor
    """float [N, max_state_dim]: the normalised, zero-padded state."""


def camera_of(image_key: str, cfg: SmolVLAPolicyConfig) -> str:
    """The env camera feeding LeRobot image input ``image_key``."""
    return cfg.camera_map.get(image_key, image_key.removeprefix(IMAGE_PREFIX).split(".")[-1])


def preprocess_image(
    obs: Observation,
    image_key: str,
    folder: LeRobotFolder,
    arch: SmolVLAArchitecture,
    cfg: SmolVLAPolicyConfig,
    device: torch.device,
) -> torch.Tensor:
    """uint8 [N, H, W, 3] of the camera feeding ``image_key`` -> float [N, 3, H', W'] in [-1, 1]."""
    camera = camera_of(image_key, cfg)
    key = f"rgb_{camera}"
    if key not in obs:
        cameras = sorted(k.removeprefix("rgb_") for k in obs if k.startswith("rgb_"))
        raise ConfigError(
            f"config key 'policy.camera_map': the policy's image input {image_key!r} reads camera "
            f"{camera!r}, which the env does not have (its cameras: {cameras})"
        )
    images = torch.as_tensor(obs[key], device=device).permute(0, 3, 1, 2).float() / 255.0
    images = normalize(images, image_key, folder)
    if arch.resize_imgs_with_padding is not None:
        width, height = arch.resize_imgs_with_padding
        images = resize_with_pad(images, height, width, pad_value=0.0)
    return images * 2.0 - 1.0


def preprocess_state(
    obs: Observation,
    folder: LeRobotFolder,
    arch: SmolVLAArchitecture,
    cfg: SmolVLAPolicyConfig,
    device: torch.device,
) -> torch.Tensor:
    """float [N, max_state_dim]: ``state_keys`` concatenated, normalised and zero-padded."""
    state = state_vector(obs, cfg.state_keys, device)
    feature = folder.input_features.get(STATE_KEY)
    if feature is not None and state.shape[-1] != feature.shape[0]:
        raise ConfigError(
            f"config key 'policy.state_keys': the env's state {cfg.state_keys} has {state.shape[-1]} values, "
            f"the policy's {STATE_KEY} has {feature.shape[0]}"
        )
    if feature is not None:
        state = normalize(state, STATE_KEY, folder)
    return pad_last_dim(state, arch.max_state_dim, "policy.state_keys")


def tokenize_instructions(
    tokenizer: PreTrainedTokenizerBase,
    instructions: list[str],
    arch: SmolVLAArchitecture,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(token ids int64 [N, T], mask bool [N, T]) of the instructions, each ending in a newline."""
    texts = [text if text.endswith("\n") else f"{text}\n" for text in instructions]
    encoded = tokenizer(
        texts,
        max_length=arch.tokenizer_max_length,
        truncation=True,
        padding=arch.pad_language_to,
        padding_side="right",
        return_tensors="pt",
    )
    return encoded["input_ids"].to(device), encoded["attention_mask"].to(device).bool()


def build_inputs(
    obs: Observation,
    folder: LeRobotFolder,
    arch: SmolVLAArchitecture,
    cfg: SmolVLAPolicyConfig,
    tokenizer: PreTrainedTokenizerBase,
    device: torch.device,
) -> SmolVLAInputs:
    """All model inputs of one observation batch."""
    images = [preprocess_image(obs, key, folder, arch, cfg, device) for key in folder.image_keys()]
    tokens, mask = tokenize_instructions(tokenizer, list(obs["instruction"]), arch, device)
    return SmolVLAInputs(images, tokens, mask, preprocess_state(obs, folder, arch, cfg, device))
