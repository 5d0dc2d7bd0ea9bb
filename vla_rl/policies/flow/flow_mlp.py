"""A small flow-matching policy for state (MLP) and pixel (CNN encoder) tasks.

Same conventions as pi0 (``vla_rl.policies.flow.chain``): the path ``x_t = t * noise + (1 - t) * action``
runs from noise at ``t = 1`` to the action at ``t = 0``; the network ``v(x_t, t, features)`` regresses
the constant velocity ``noise - action`` with ``t ~ U(0, 1)``; sampling integrates ``K`` Euler steps
from ``t = 1`` to ``t = 0`` (stochastic Euler-Maruyama steps give the chunk log-probability). Actions
are modelled directly in env units (already in [-1, 1]) and clipped to that range at the output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import ChunkEvaluation, ChunkStep, SampleInfo, SFTOutput
from vla_rl.policies.cnn import ImageEncoder
from vla_rl.policies.flow import chain
from vla_rl.policies.flow.chain_policy import FlowChainPolicy
from vla_rl.policies.flow.chunk_padding import fill_padded_steps
from vla_rl.policies.flow.exploration import (
    ExplorationConfig,
    chain_transitions,
    sample_chain,
    stored_step_mask,
)
from vla_rl.policies.layers import VectorObsEncoder, activation_class, build_mlp
from vla_rl.policies.pretrained_io import DictConfig

CONFIG_FILE = "flow_mlp_config.json"
MIN_PERIOD = 0.1
"""Shortest period of the sinusoidal time embedding (in units of t)."""
MAX_PERIOD = 4.0
"""Longest period of the sinusoidal time embedding."""


@dataclass
class FlowMLPConfig(ExplorationConfig, DictConfig):
    """Sizes of the flow MLP policy (saved as JSON next to its weights)."""

    chunk_len: int = 1
    """Actions per chunk."""
    action_dim: int = 4
    """Values per action."""
    vector_obs_dims: dict[str, int] = field(default_factory=lambda: {"proprio": 0})
    """Vector observation keys and their widths (e.g. ``{"proprio": 10, "privileged": 6}``)."""
    image_keys: list[str] = field(default_factory=list)
    """``rgb_*`` keys fed to the CNN encoder of ``vla_rl.policies.cnn`` (empty: state-only)."""
    image_shape: list[int] = field(default_factory=lambda: [64, 64])
    """[H, W] of the images (all cameras share it)."""
    cnn_channels: list[int] = field(default_factory=lambda: [16, 32])
    """Output channels of the convolutions."""
    cnn_feature_dim: int = 64
    """Width of the image embedding."""
    normalize_obs: bool = False
    """Running mean/std normalisation of the vector keys (updated by ``update_normalizer``)."""
    feature_dim: int = 64
    """Width of the observation features shared by the velocity network and the value head."""
    hidden_sizes: list[int] = field(default_factory=lambda: [128, 128])
    """Hidden widths of the velocity MLP."""
    time_embed_dim: int = 32
    """Width of the sinusoidal embedding of t (even)."""
    activation: str = "silu"
    """Activation of all MLPs."""
    num_denoising_steps: int = 10
    """Euler steps K from noise to action."""
    value_hidden_sizes: list[int] = field(default_factory=lambda: [64])
    """Hidden widths of the value head."""

    def __post_init__(self) -> None:
        self.validate_exploration()  # a bad exploration setting fails here, before any work


def sinusoidal_time_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """[N] times -> [N, dim]: sin and cos at periods spaced geometrically in [MIN_PERIOD, MAX_PERIOD]."""
    fraction = torch.linspace(0.0, 1.0, dim // 2, device=t.device)
    frequency = 2.0 * math.pi / (MIN_PERIOD * (MAX_PERIOD / MIN_PERIOD) ** fraction)
    angle = t.float()[:, None] * frequency[None, :]
    return torch.cat([angle.sin(), angle.cos()], dim=-1)


def observation_space_of(cfg: FlowMLPConfig) -> gym.spaces.Dict:
    spaces: dict[str, gym.Space] = {
        key: gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32) for key, dim in cfg.vector_obs_dims.items()
    }
    for key in cfg.image_keys:
        spaces[key] = gym.spaces.Box(0, 255, (*cfg.image_shape, 3), np.uint8)
    return gym.spaces.Dict(spaces)


class FlowObsEncoder(nn.Module):
    """Vector keys (+ optional CNN image features) -> features [N, feature_dim]."""

    def __init__(self, cfg: FlowMLPConfig) -> None:
        super().__init__()
        space = observation_space_of(cfg)
        self.vector_keys = [key for key, dim in cfg.vector_obs_dims.items() if dim > 0]
        self.vectors = VectorObsEncoder(self.vector_keys, space, cfg.normalize_obs)
        self.images = (
            ImageEncoder(cfg.image_keys, space, cfg.cnn_channels, cfg.cnn_feature_dim, cfg.activation)
            if cfg.image_keys
            else None
        )
        width = self.vectors.output_dim(self.vector_keys) + (cfg.cnn_feature_dim if self.images else 0)
        if width == 0:
            raise ValueError("flow_mlp needs at least one vector key with a width > 0 or an image key")
        self.project = nn.Sequential(nn.Linear(width, cfg.feature_dim), activation_class(cfg.activation)())

    def forward(self, obs: Observation) -> torch.Tensor:
        parts = []
        if self.images is not None:
            parts.append(self.images(obs))
        if self.vector_keys:
            parts.append(self.vectors.encode(obs, self.vector_keys))
        return self.project(torch.cat(parts, dim=-1))


@dataclass
class FlowMLPBuildSettings(FlowMLPConfig):
    """The construction values of ``flow_mlp`` (an SFT config's ``policy.kwargs``, the keywords of
    ``build``): every ``FlowMLPConfig`` field plus a shorthand."""

    proprio_dim: int | None = None
    """Short for ``vector_obs_dims: {proprio: proprio_dim}`` (ignored when ``vector_obs_dims`` is given)."""


class FlowMLPPolicy(FlowChainPolicy):
    """Velocity MLP ``v(x_t, t, obs features)`` over the flattened chunk, with a value head."""

    registry_name = "flow_mlp"
    config_file = CONFIG_FILE

    def __init__(self, cfg: FlowMLPConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.chunk_len = cfg.chunk_len
        self.action_dim = cfg.action_dim
        self.encoder = FlowObsEncoder(cfg)
        flat = cfg.chunk_len * cfg.action_dim
        in_dim = flat + cfg.time_embed_dim + cfg.feature_dim
        self.velocity_net = build_mlp(in_dim, cfg.hidden_sizes, flat, cfg.activation, out_gain=1.0)
        self.value_head = build_mlp(cfg.feature_dim, cfg.value_hidden_sizes, 1, cfg.activation, out_gain=1.0)
        self.noise_head_sizes = (in_dim, flat)  # the velocity MLP's input -> one std per chunk entry
        self.set_exploration()

    @classmethod
    def build(cls, **kwargs: object) -> FlowMLPPolicy:
        """Keywords: the ``FlowMLPConfig`` fields; ``proprio_dim=P`` is short for
        ``vector_obs_dims={"proprio": P}``."""
        values = dict(kwargs)
        if "proprio_dim" in values:
            values.setdefault("vector_obs_dims", {"proprio": int(values.pop("proprio_dim"))})  # type: ignore[arg-type]
        return cls.from_config(values)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> FlowMLPPolicy:
        return cls(FlowMLPConfig.from_dict(config))

    @property
    def num_steps(self) -> int:
        return self.cfg.num_denoising_steps

    def features(self, obs: Observation) -> torch.Tensor:
        return self.encoder(obs)

    def velocity(self, features: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``x_t`` [N, chunk, A], ``t`` [N] -> velocity [N, chunk, A]."""
        return self.velocity_and_std(features, x_t, t)[0]

    def velocity_and_std(
        self, features: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The velocity and, with ``flow_noise``, the noise head's std (same shape as ``x_t``)."""
        inputs = torch.cat(
            [x_t.flatten(1), sinusoidal_time_embedding(t, self.cfg.time_embed_dim), features], dim=-1
        )
        std = None if self.noise_head is None else self.noise_head(inputs).view_as(x_t)
        return self.velocity_net(inputs).view_as(x_t), std

    def update_normalizer(self, obs: Observation) -> None:
        self.encoder.vectors.update(obs)

    def _sample(
        self,
        obs: Observation,
        temperature: float,
        deterministic: bool,
        level: str,
        with_value: bool,
        noise: torch.Tensor | None = None,
    ) -> ChunkStep:
        times = chain.denoising_times(self.num_steps).tolist()
        features = self.features(obs)
        batch = features.shape[0]

        def velocity_fn(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor | None]:
            return self.velocity_and_std(features, x, torch.full((batch,), times[k], device=x.device))

        if noise is None:
            noise = torch.randn(batch, self.chunk_len, self.action_dim, device=features.device)
        sampled = sample_chain(self.exploration, velocity_fn, noise.to(features), temperature, deterministic)
        value = self.value_head(self.critic_input(features)).squeeze(-1) if with_value else None
        return self.chain_step(sampled, sampled.states[:, -1].clamp(-1.0, 1.0), value)

    def _evaluate(
        self, obs: Observation, sample_info: SampleInfo, temperature: float, level: str, with_value: bool
    ) -> ChunkEvaluation:
        """All K transitions of all chains in one batched pass of the velocity MLP."""
        features = self.features(obs)
        chain_states = sample_info["chain"].to(features.device)
        batch, steps = chain_states.shape[0], self.num_steps
        times = chain.denoising_times(steps)[:-1].to(features.device).repeat(batch)
        starts = chain_states[:, :-1].flatten(0, 1)
        velocity, learned = self.velocity_and_std(features.repeat_interleave(steps, dim=0), starts, times)
        per_step = chain_states[:, 1:].shape
        step_mask = stored_step_mask(sample_info, chain_states)
        means, stds = chain_transitions(
            self.exploration,
            chain_states,
            velocity.view(per_step),
            step_mask,
            temperature,
            None if learned is None else learned.view(per_step),
        )
        value = self.value_head(self.critic_input(features)).squeeze(-1) if with_value else None
        return self.chain_evaluation(chain_states, means, stds, step_mask, value)

    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        """Conditional flow matching: mean over real chunk steps of ``||v(x_t, t) - (noise - action)||^2 / A``
        (padded steps hold the last real action, see ``chunk_padding``)."""
        features = self.features(obs)
        mask = chunk_mask.to(features.device)
        actions = fill_padded_steps(action_chunk.to(features.device).float(), mask)
        noise = torch.randn_like(actions)
        t = torch.rand(actions.shape[0], device=actions.device)
        x_t = t[:, None, None] * noise + (1.0 - t[:, None, None]) * actions
        per_step = (self.velocity(features, x_t, t) - (noise - actions)).square().mean(dim=-1)
        weights = mask.to(per_step.dtype)
        loss = (per_step * weights).sum() / weights.sum().clamp(min=1.0)
        return SFTOutput(loss=loss, metrics={"flow_mse": float(loss.detach())})
