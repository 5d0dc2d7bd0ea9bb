"""Spatial-softmax image encoder: convolutions that keep a feature map, read out as keypoints.

Each channel of the last convolution becomes a probability map over image positions (a softmax
with a learned temperature); the encoder outputs the expected (x, y) of every map in [-1, 1].
This is the visuomotor-policy encoder of Levine et al. (2016), also used by robomimic and
diffusion policies: where something is matters more to a manipulation policy than what a
flattened feature map says about it, and a few coordinates are an easy input for a small head.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.layers import (
    HIDDEN_INIT_GAIN,
    activation_class,
    conv_layouts,
    coordinate_planes,
    image_conv_trunk,
    orthogonal_linear,
    stacked_images,
)

KEYPOINT_CONVS = [(4, 2, 1), (3, 2, 1)]
"""(kernel, stride, padding) of the first convolutions: 64x64 -> 32x32 -> 16x16. Later ones use
``(3, 1, 1)``, which keeps the map size."""
LATER_KEYPOINT_CONV = (3, 1, 1)


class SpatialSoftmax(nn.Module):
    """Feature maps [N, K, H, W] -> expected coordinates [N, K, 2] (x then y, each in [-1, 1])."""

    def __init__(self, height: int, width: int) -> None:
        super().__init__()
        grid = coordinate_planes(height, width).flatten(1).T  # [H * W, 2]
        self.register_buffer("grid", grid, persistent=False)
        self.log_temperature = nn.Parameter(torch.zeros(()))
        """Softmax temperature (learned; starts at 1)."""

    def forward(self, maps: torch.Tensor) -> torch.Tensor:
        flat = maps.flatten(2) / self.log_temperature.exp()
        return torch.softmax(flat, dim=-1) @ self.grid


class KeypointImageEncoder(nn.Module):
    """uint8 images [N, H, W, 3] -> [N, feature_dim] through convolutions and a spatial softmax.

    ``channels[-1]`` is the number of keypoints; the 2 * keypoints coordinates pass through one
    linear layer. Cameras are stacked along channels as in ``ImageEncoder``.
    """

    def __init__(
        self,
        keys: list[str],
        observation_space: gym.spaces.Dict,
        channels: list[int],
        feature_dim: int,
        activation: str,
    ) -> None:
        super().__init__()
        self.keys = keys
        layouts = conv_layouts(KEYPOINT_CONVS, LATER_KEYPOINT_CONV, len(channels))
        # The keypoint maps themselves stay linear (no activation before the softmax).
        self.convs, map_shape = image_conv_trunk(
            keys, observation_space, channels, layouts, activation, activate_last=False
        )
        self.spatial_softmax = SpatialSoftmax(map_shape[-2], map_shape[-1])
        coordinates, act = 2 * channels[-1], activation_class(activation)
        self.project = nn.Sequential(orthogonal_linear(coordinates, feature_dim, HIDDEN_INIT_GAIN), act())

    def keypoints(self, obs: Observation) -> torch.Tensor:
        """Expected (x, y) of each keypoint map, [N, K, 2]."""
        return self.spatial_softmax(self.convs(stacked_images(obs, self.keys)))

    def forward(self, obs: Observation) -> torch.Tensor:
        return self.project(self.keypoints(obs).flatten(1))
