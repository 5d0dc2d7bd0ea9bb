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
from vla_rl.policies.layers import HIDDEN_INIT_GAIN, activation_class, orthogonal_linear, shared_image_size

KEYPOINT_CONVS = [(4, 2, 1), (3, 2, 1)]
"""(kernel, stride, padding) of the first convolutions: 64x64 -> 32x32 -> 16x16. Later ones use
``(3, 1, 1)``, which keeps the map size."""
LATER_KEYPOINT_CONV = (3, 1, 1)


class SpatialSoftmax(nn.Module):
    """Feature maps [N, K, H, W] -> expected coordinates [N, K, 2] (x then y, each in [-1, 1])."""

    def __init__(self, height: int, width: int) -> None:
        super().__init__()
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
        self.register_buffer("grid", torch.stack([xs.flatten(), ys.flatten()], dim=-1), persistent=False)
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
        height, width = shared_image_size(keys, observation_space)
        act = activation_class(activation)
        layers: list[nn.Module] = []
        in_channels = 3 * len(keys)
        for i, out_channels in enumerate(channels):
            kernel, stride, padding = KEYPOINT_CONVS[i] if i < len(KEYPOINT_CONVS) else LATER_KEYPOINT_CONV
            conv = nn.Conv2d(in_channels, out_channels, kernel, stride, padding)
            nn.init.orthogonal_(conv.weight, HIDDEN_INIT_GAIN)
            nn.init.zeros_(conv.bias)
            layers.append(conv)
            if i < len(channels) - 1:  # the keypoint maps themselves stay linear
                layers.append(act())
            in_channels = out_channels
        self.convs = nn.Sequential(*layers)
        with torch.no_grad():
            map_shape = self.convs(torch.zeros(1, 3 * len(keys), height, width)).shape
        self.spatial_softmax = SpatialSoftmax(map_shape[-2], map_shape[-1])
        coordinates = 2 * channels[-1]
        self.project = nn.Sequential(orthogonal_linear(coordinates, feature_dim, HIDDEN_INIT_GAIN), act())
        self.feature_dim = feature_dim

    def keypoints(self, obs: Observation) -> torch.Tensor:
        """Expected (x, y) of each keypoint map, [N, K, 2]."""
        images = torch.cat([obs[key] for key in self.keys], dim=-1)
        x = images.permute(0, 3, 1, 2).float().div_(255.0)
        return self.spatial_softmax(self.convs(x))

    def forward(self, obs: Observation) -> torch.Tensor:
        return self.project(self.keypoints(obs).flatten(1))
