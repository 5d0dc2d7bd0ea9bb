"""The observation encoder of the off-policy learner (SAC, RLPD): the camera images through a small
convolutional trunk into a LayerNorm'd, tanh-squashed feature vector (the pixel encoder of SAC-AE and
DrQ, whose bounded features keep the critics' inputs in range while the critic loss trains it),
followed by the vector keys as they are.

The trunk is the project's (``image_conv_trunk``: the cameras stacked along channels, uint8 scaled to
[0, 1] by ``stacked_images``); the defaults are DrQ's: four 3x3 convolutions of 32 channels, the first
of stride 2 (a 64x64 image leaves 25x25x32), and 50 features.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.cnn import custom_conv_layouts
from vla_rl.policies.layers import (
    VectorObsEncoder,
    image_conv_trunk,
    is_image_key,
    orthogonal_linear,
    stacked_images,
)

DEFAULT_CNN_CHANNELS = (32, 32, 32, 32)
"""DrQ's convolutions: output channels of each."""
DEFAULT_CNN_KERNEL_STRIDE = ((3, 2), (3, 1), (3, 1), (3, 1))
"""DrQ's convolutions: (kernel, stride) of each, no padding."""
DEFAULT_CNN_FEATURE_DIM = 50
"""DrQ's width of the image features."""
PROJECTION_GAIN = 1.0


def conv_output_px(size_px: int, kernel_stride: list[list[int]] | tuple[tuple[int, int], ...]) -> int:
    """Height (or width) left of an image ``size_px`` pixels high after unpadded convolutions of
    ``[[kernel, stride], ...]``; <= 0 when they do not fit."""
    for kernel, stride in kernel_stride:
        if size_px < kernel:
            return 0
        size_px = (size_px - kernel) // stride + 1
    return size_px


class SACObsEncoder(nn.Module):
    """``obs`` -> features [B, F]: the image features of the ``rgb_*`` keys of ``obs_keys`` (when any),
    then the other keys of ``obs_keys`` flattened, in their order. Without cameras it has no weights."""

    def __init__(
        self,
        obs_keys: list[str],
        observation_space: gym.spaces.Dict,
        cnn_channels: list[int] | tuple[int, ...] = DEFAULT_CNN_CHANNELS,
        cnn_kernel_stride: list[list[int]] | tuple[tuple[int, int], ...] = DEFAULT_CNN_KERNEL_STRIDE,
        cnn_feature_dim: int = DEFAULT_CNN_FEATURE_DIM,
        activation: str = "relu",
    ) -> None:
        super().__init__()
        self.image_keys = [key for key in obs_keys if is_image_key(key)]
        self.vector_keys = [key for key in obs_keys if not is_image_key(key)]
        self.vectors = VectorObsEncoder(self.vector_keys, observation_space, normalize=False)
        self.output_dim = self.vectors.output_dim(self.vector_keys)
        """Width F of the features."""
        self.convs: nn.Sequential | None = None
        self.project: nn.Sequential | None = None
        if not self.image_keys:
            return
        pairs = [list(pair) for pair in cnn_kernel_stride]
        layouts = custom_conv_layouts(pairs, len(cnn_channels))
        height, width = observation_space[self.image_keys[0]].shape[:2]
        if min(conv_output_px(height, pairs), conv_output_px(width, pairs)) <= 0:
            raise ValueError(
                f"convolutions {pairs} leave no pixel of {height}x{width} images; use fewer or smaller ones"
            )
        self.convs, (_, flat_dim) = image_conv_trunk(
            self.image_keys, observation_space, list(cnn_channels), layouts, activation, flatten=True
        )
        linear = orthogonal_linear(flat_dim, cnn_feature_dim, PROJECTION_GAIN)
        self.project = nn.Sequential(linear, nn.LayerNorm(cnn_feature_dim), nn.Tanh())
        self.output_dim += cnn_feature_dim

    def forward(self, obs: Observation) -> torch.Tensor:
        parts = []
        if self.convs is not None and self.project is not None:
            parts.append(self.project(self.convs(stacked_images(obs, self.image_keys))))
        if self.vector_keys:
            parts.append(self.vectors.encode(obs, self.vector_keys))
        return torch.cat(parts, dim=-1)
