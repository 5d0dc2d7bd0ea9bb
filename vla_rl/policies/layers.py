"""Building blocks shared by the policies: MLPs, activations, observation key handling."""

from __future__ import annotations

import math

import gymnasium as gym
import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.normalizer import RunningMeanStd

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "elu": nn.ELU,
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
}
IMAGE_KEY_PREFIX = "rgb_"
HIDDEN_INIT_GAIN = math.sqrt(2.0)


def is_image_key(key: str) -> bool:
    return key.startswith(IMAGE_KEY_PREFIX)


def activation_class(name: str) -> type[nn.Module]:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; allowed: {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def build_mlp(
    in_dim: int, hidden_sizes: list[int], out_dim: int, activation: str, out_gain: float
) -> nn.Sequential:
    """Linear layers with orthogonal init (gain sqrt(2) hidden, ``out_gain`` last), zero biases."""
    act = activation_class(activation)
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_sizes:
        layers += [orthogonal_linear(width, hidden, HIDDEN_INIT_GAIN), act()]
        width = hidden
    layers.append(orthogonal_linear(width, out_dim, out_gain))
    return nn.Sequential(*layers)


def orthogonal_linear(in_dim: int, out_dim: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def check_obs_keys(keys: list[str], observation_space: gym.spaces.Dict, role: str) -> None:
    """Raise ``ValueError`` naming any key missing from the space (and the allowed keys)."""
    if not keys:
        raise ValueError(f"{role} observation keys are empty; allowed: {sorted(observation_space.spaces)}")
    for key in keys:
        if key not in observation_space.spaces:
            raise ValueError(
                f"{role} observation key {key!r} is not in the observation space; "
                f"allowed: {sorted(observation_space.spaces)}"
            )


def vector_dim(observation_space: gym.spaces.Dict, key: str) -> int:
    space = observation_space[key]
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"observation key {key!r} must be a Box space, got {space}")
    return int(math.prod(space.shape))


class VectorObsEncoder(nn.Module):
    """Flattens and concatenates vector observation keys, each with its own running normaliser.

    One instance is shared by actor and critic so both see the same statistics; ``encode``
    picks which keys (in which order) a head receives.
    """

    def __init__(self, keys: list[str], observation_space: gym.spaces.Dict, normalize: bool) -> None:
        super().__init__()
        self.keys = list(dict.fromkeys(keys))
        self.dims = {key: vector_dim(observation_space, key) for key in self.keys}
        self.normalize = normalize
        self.normalizers = nn.ModuleDict(
            {key: RunningMeanStd((dim,)) for key, dim in self.dims.items()} if normalize else {}
        )

    def output_dim(self, keys: list[str]) -> int:
        return sum(self.dims[key] for key in keys)

    def update(self, obs: Observation) -> None:
        for key, normalizer in self.normalizers.items():
            normalizer.update(obs[key].reshape(obs[key].shape[0], -1))

    def encode(self, obs: Observation, keys: list[str]) -> torch.Tensor:
        parts = []
        for key in keys:
            x = obs[key].reshape(obs[key].shape[0], -1).float()
            parts.append(self.normalizers[key](x) if self.normalize else x)
        return torch.cat(parts, dim=-1)


def shared_image_size(keys: list[str], observation_space: gym.spaces.Dict) -> tuple[int, int]:
    """(H, W) of the ``rgb_*`` images ``keys``, which must all be (H, W, 3) to be stacked."""
    shapes = {key: tuple(observation_space[key].shape) for key in keys}
    for key, shape in shapes.items():
        if len(shape) != 3 or shape[-1] != 3:
            raise ValueError(f"image key {key!r} must have shape (H, W, 3), got {shape}")
    sizes = {shape[:2] for shape in shapes.values()}
    if len(sizes) != 1:
        raise ValueError(f"cameras must share one image size to be stacked, got {shapes}")
    return sizes.pop()


def conv_layouts(first: list[tuple[int, int, int]], later: tuple[int, int, int], count: int) -> list:
    """``count`` (kernel, stride, padding) triples: ``first`` for the leading layers, then ``later``."""
    return [first[i] if i < len(first) else later for i in range(count)]


def conv_layers(
    in_channels: int,
    channels: list[int],
    layouts: list[tuple[int, int, int]],
    activation: str,
    activate_last: bool = True,
) -> list[nn.Module]:
    """Convolutions ``channels`` with ``layouts`` [(kernel, stride, padding)], orthogonal weights,
    zero biases and ``activation`` after each (after the last only with ``activate_last``)."""
    act = activation_class(activation)
    layers: list[nn.Module] = []
    for i, (out_channels, (kernel, stride, padding)) in enumerate(zip(channels, layouts, strict=True)):
        conv = nn.Conv2d(in_channels, out_channels, kernel, stride, padding)
        nn.init.orthogonal_(conv.weight, HIDDEN_INIT_GAIN)
        nn.init.zeros_(conv.bias)
        layers.append(conv)
        if activate_last or i < len(channels) - 1:
            layers.append(act())
        in_channels = out_channels
    return layers


def image_conv_trunk(
    keys: list[str],
    observation_space: gym.spaces.Dict,
    channels: list[int],
    layouts: list[tuple[int, int, int]],
    activation: str,
    activate_last: bool = True,
    flatten: bool = False,
    extra_in_channels: int = 0,
) -> tuple[nn.Sequential, torch.Size]:
    """Convolutions over the stacked cameras ``keys`` (see ``conv_layers``) plus
    ``extra_in_channels`` input planes, optionally flattened, and the shape of their output for one
    observation [1, ...]."""
    height, width = shared_image_size(keys, observation_space)
    in_channels = 3 * len(keys) + extra_in_channels
    layers = conv_layers(in_channels, channels, layouts, activation, activate_last)
    trunk = nn.Sequential(*layers, *([nn.Flatten()] if flatten else []))
    with torch.no_grad():
        output_shape = trunk(torch.zeros(1, in_channels, height, width)).shape
    return trunk, output_shape


def stacked_images(obs: Observation, keys: list[str]) -> torch.Tensor:
    """uint8 images [N, H, W, 3] of ``keys`` -> float [N, 3 * len(keys), H, W] in [0, 1]."""
    images = torch.cat([obs[key] for key in keys], dim=-1)
    return images.permute(0, 3, 1, 2).float().div_(255.0)


def coordinate_planes(height: int, width: int) -> torch.Tensor:
    """[2, H, W]: each pixel's x then y coordinate, from -1 (left/top) to 1 (right/bottom).

    Appended to an image as input channels (CoordConv, Liu et al. 2018) they let convolutions,
    which are translation-equivariant, output where something is and not only what it is.
    """
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
    return torch.stack([xs, ys])
