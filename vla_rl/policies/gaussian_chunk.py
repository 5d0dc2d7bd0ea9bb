"""The config of the Gaussian actor-critics as chunk policies (registry name ``gaussian``).

A saved ``gaussian`` folder holds this config as ``gaussian_chunk_config.json`` next to the weights
(``vla_rl.policies.base.ActorCriticPolicy``). SFT loss (``sft_loss_type``): ``"nll"`` is the
negative log-likelihood of the demonstrated actions per real action (it also fits ``log_std``);
``"mse"`` is the mean squared error of the mean action (deterministic behaviour cloning, ``log_std``
untouched).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.layers import is_image_key
from vla_rl.policies.pretrained_io import DictConfig

CONFIG_FILE = "gaussian_chunk_config.json"
SFT_LOSSES = ("nll", "mse")


@dataclass
class GaussianChunkConfig(DictConfig):
    """The Gaussian policy's config plus the observation shapes it is built for."""

    chunk_len: int = 1
    """Actions per chunk (1 = the plain PPO policy)."""
    action_dim: int = 4
    """Values per action."""
    obs_shapes: dict[str, list[int]] = field(default_factory=lambda: {"proprio": [0]})
    """Observation key -> shape of one world's value (``rgb_*`` keys: [H, W, 3], uint8)."""
    policy: dict[str, object] = field(default_factory=dict)
    """``PolicyConfig`` fields (``name``: ``mlp`` or ``cnn``, keys, hidden sizes, ...)."""
    sft_loss_type: str = "nll"
    """``nll`` (Gaussian negative log-likelihood) or ``mse`` (of the mean)."""

    def __post_init__(self) -> None:
        if self.sft_loss_type not in SFT_LOSSES:
            raise ValueError(f"sft_loss_type must be one of {SFT_LOSSES}, got {self.sft_loss_type!r}")

    def observation_space(self) -> gym.spaces.Dict:
        spaces = {}
        for key, shape in self.obs_shapes.items():
            if is_image_key(key):
                spaces[key] = gym.spaces.Box(0, 255, tuple(shape), np.uint8)
            else:
                spaces[key] = gym.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)
        return gym.spaces.Dict(spaces)

    def action_space(self) -> gym.spaces.Box:
        """The space of one action (the policy outputs ``chunk_len`` of them)."""
        return gym.spaces.Box(-1.0, 1.0, (self.action_dim,), np.float32)


@dataclass
class GaussianChunkBuildSettings(GaussianChunkConfig):
    """The construction values of ``gaussian`` (an SFT config's ``policy.kwargs``, the keywords of
    ``build``): the ``GaussianChunkConfig`` fields with the Gaussian policy's typed, plus a shorthand."""

    policy: PolicyConfig = field(default_factory=lambda: PolicyConfig(actor_obs_keys=["proprio"]))  # type: ignore[assignment]
    """The Gaussian policy's ``PolicyConfig`` fields (``name``: ``mlp`` or ``cnn``, keys, hidden
    sizes, ...); the actor reads ``proprio`` unless ``actor_obs_keys`` says otherwise."""
    proprio_dim: int | None = None
    """Short for ``obs_shapes: {proprio: [proprio_dim]}`` (ignored when ``obs_shapes`` is given)."""
