"""Gaussian actor-critic with a small convolutional encoder for ``rgb_*`` camera images."""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.base import ACTOR_OUT_GAIN, CRITIC_OUT_GAIN, ActorCriticPolicy
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.keypoints import KeypointImageEncoder
from vla_rl.policies.layers import (
    HIDDEN_INIT_GAIN,
    VectorObsEncoder,
    activation_class,
    build_mlp,
    check_obs_keys,
    conv_layouts,
    coordinate_planes,
    image_conv_trunk,
    is_image_key,
    orthogonal_linear,
    shared_image_size,
    stacked_images,
)

CONV_LAYOUTS = [(8, 4, 0), (4, 2, 0)]
"""(kernel, stride, padding) of the first convolutions (Atari-style downsampling); later ones use
``(3, 1, 0)``."""
LATER_CONV_LAYOUT = (3, 1, 0)


class ImageEncoder(nn.Module):
    """uint8 images [N, H, W, 3] of one or more cameras -> feature vector [N, feature_dim].

    Cameras are stacked along channels (they must share H and W), scaled to [0, 1], optionally
    given two pixel-coordinate planes, passed through strided convolutions and one linear layer.
    """

    def __init__(
        self,
        keys: list[str],
        observation_space: gym.spaces.Dict,
        channels: list[int],
        feature_dim: int,
        activation: str,
        kernel_stride: list[list[int]] | None = None,
        coord_channels: bool = False,
    ) -> None:
        super().__init__()
        self.keys = keys
        if kernel_stride is None:
            layouts = conv_layouts(CONV_LAYOUTS, LATER_CONV_LAYOUT, len(channels))
        else:
            layouts = custom_conv_layouts(kernel_stride, len(channels))
        self.convs, (_, flat_dim) = image_conv_trunk(
            keys,
            observation_space,
            channels,
            layouts,
            activation,
            flatten=True,
            extra_in_channels=2 if coord_channels else 0,
        )
        if coord_channels:
            height, width = shared_image_size(keys, observation_space)
            self.register_buffer("coords", coordinate_planes(height, width), persistent=False)
        else:
            self.coords = None
        act = activation_class(activation)
        self.project = nn.Sequential(orthogonal_linear(flat_dim, feature_dim, HIDDEN_INIT_GAIN), act())

    def forward(self, obs: Observation) -> torch.Tensor:
        images = stacked_images(obs, self.keys)
        if self.coords is not None:
            images = torch.cat([images, self.coords.expand(images.shape[0], -1, -1, -1)], dim=1)
        return self.project(self.convs(images))


def custom_conv_layouts(kernel_stride: list[list[int]], count: int) -> list[tuple[int, int, int]]:
    """(kernel, stride, padding 0) of each of ``count`` convolutions from [[kernel, stride], ...]."""
    if len(kernel_stride) != count or any(len(pair) != 2 or min(pair) < 1 for pair in kernel_stride):
        raise ValueError(
            f"cnn_kernel_stride needs one [kernel, stride] pair of positive integers per entry of "
            f"cnn_channels ({count}), got {kernel_stride}"
        )
    return [(kernel, stride, 0) for kernel, stride in kernel_stride]


IMAGE_ENCODERS: dict[str, type[ImageEncoder] | type[KeypointImageEncoder]] = {
    "conv": ImageEncoder,
    "spatial_softmax": KeypointImageEncoder,
}
"""Image encoders by ``PolicyConfig.image_encoder`` name."""


def build_image_encoder(
    cfg: PolicyConfig, keys: list[str], observation_space: gym.spaces.Dict
) -> ImageEncoder | KeypointImageEncoder:
    """The ``cfg.image_encoder`` encoder (``conv`` or ``spatial_softmax``) for the cameras ``keys``;
    ``cnn_kernel_stride`` and ``cnn_coord_channels`` are options of ``conv``."""
    kind, sizes = cfg.image_encoder, (cfg.cnn_channels, cfg.cnn_feature_dim, cfg.activation)
    if kind not in IMAGE_ENCODERS:
        raise ValueError(f"unknown image encoder {kind!r}; known: {sorted(IMAGE_ENCODERS)}")
    if kind != "conv":
        if cfg.cnn_kernel_stride is not None or cfg.cnn_coord_channels:
            raise ValueError("cnn_kernel_stride and cnn_coord_channels are options of image_encoder=conv")
        return IMAGE_ENCODERS[kind](keys, observation_space, *sizes)
    return ImageEncoder(keys, observation_space, *sizes, cfg.cnn_kernel_stride, cfg.cnn_coord_channels)


class GaussianCNNPolicy(ActorCriticPolicy):
    """Image features concatenated with normalised vector keys, followed by MLP heads.

    With ``share_encoder`` the actor and critic use one image encoder (trained by both losses).
    A critic given no image key is a plain MLP on its vector keys (asymmetric actor-critic).
    """

    registry_name = "cnn"

    def _build_networks(self, cfg: PolicyConfig, observation_space: gym.spaces.Dict) -> None:
        actor_keys = list(cfg.actor_obs_keys or [])
        critic_keys = list(cfg.critic_obs_keys) if cfg.critic_obs_keys is not None else actor_keys
        check_obs_keys(actor_keys, observation_space, "actor")
        check_obs_keys(critic_keys, observation_space, "critic")
        self.actor_image_keys = [k for k in actor_keys if is_image_key(k)]
        self.critic_image_keys = [k for k in critic_keys if is_image_key(k)]
        if not self.actor_image_keys:
            raise ValueError(f"policy 'cnn' needs an rgb_* key among actor keys, got {actor_keys}")
        self.actor_vector_keys = [k for k in actor_keys if not is_image_key(k)]
        self.critic_vector_keys = [k for k in critic_keys if not is_image_key(k)]
        self.aux_target_key = cfg.aux_target_key
        self.aux_coef = cfg.aux_coef
        aux_keys = [cfg.aux_target_key] if cfg.aux_target_key is not None else []
        if aux_keys:
            check_obs_keys(aux_keys, observation_space, "auxiliary target")
        if any(is_image_key(key) for key in aux_keys):
            raise ValueError(f"aux_target_key must be a vector key, got {cfg.aux_target_key!r}")
        self.obs_encoder = VectorObsEncoder(
            self.actor_vector_keys + self.critic_vector_keys + aux_keys, observation_space, cfg.normalize_obs
        )

        self.actor_encoder = build_image_encoder(cfg, self.actor_image_keys, observation_space)
        self.shared_encoder = bool(cfg.share_encoder) and self.critic_image_keys == self.actor_image_keys
        self.critic_encoder: ImageEncoder | KeypointImageEncoder | None = None
        if self.critic_image_keys and not self.shared_encoder:
            self.critic_encoder = build_image_encoder(cfg, self.critic_image_keys, observation_space)

        actor_in = cfg.cnn_feature_dim + self.obs_encoder.output_dim(self.actor_vector_keys)
        critic_in = self.obs_encoder.output_dim(self.critic_vector_keys)
        if self.critic_image_keys:
            critic_in += cfg.cnn_feature_dim
        actor_out = self.chunk_len * self.action_dim
        self.actor = build_mlp(actor_in, cfg.head_sizes(), actor_out, cfg.activation, ACTOR_OUT_GAIN)
        self.critic = build_mlp(critic_in, cfg.head_sizes(), 1, cfg.activation, CRITIC_OUT_GAIN)
        self.aux_head: nn.Linear | None = None
        if cfg.aux_target_key is not None:
            self.aux_head = nn.Linear(cfg.cnn_feature_dim, self.obs_encoder.output_dim(aux_keys))
        self._last_features: tuple[Observation, torch.Tensor] | None = None
        """(obs, actor image features) of the last ``mean_and_value`` call with gradients, for the
        auxiliary loss on the same minibatch."""

    def _actor_input(self, obs: Observation, image_features: torch.Tensor) -> torch.Tensor:
        if not self.actor_vector_keys:
            return image_features
        return torch.cat([image_features, self.obs_encoder.encode(obs, self.actor_vector_keys)], dim=-1)

    def _critic_value(self, obs: Observation, actor_image_features: torch.Tensor | None) -> torch.Tensor:
        parts = []
        if self.critic_image_keys:
            if self.shared_encoder:
                shared = actor_image_features
                parts.append(shared if shared is not None else self.actor_encoder(obs))
            else:
                assert self.critic_encoder is not None
                parts.append(self.critic_encoder(obs))
        if self.critic_vector_keys:
            parts.append(self.obs_encoder.encode(obs, self.critic_vector_keys))
        return self.critic(torch.cat(parts, dim=-1)).squeeze(-1)

    def get_value(self, obs: Observation) -> torch.Tensor:
        return self._critic_value(obs, None)

    def mean_and_value(self, obs: Observation) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.actor_encoder(obs)
        if self.aux_head is not None and torch.is_grad_enabled():
            self._last_features = (obs, features)
        return self.actor(self._actor_input(obs, features)), self._critic_value(obs, features)

    def auxiliary_loss(self, obs: Observation) -> torch.Tensor | None:
        """``aux_coef`` x mean squared error of the normalised ``aux_target_key`` predicted from the
        actor's image features (those of the preceding ``evaluate`` when it saw the same ``obs``)."""
        if self.aux_head is None or self.aux_target_key is None:
            return None
        cached = self._last_features
        features = cached[1] if cached is not None and cached[0] is obs else self.actor_encoder(obs)
        self._last_features = None
        target = self.obs_encoder.encode(obs, [self.aux_target_key])
        return self.aux_coef * (self.aux_head(features) - target).square().mean()

    def update_normalizer(self, obs: Observation) -> None:
        self.obs_encoder.update(obs)
