"""Gaussian actor-critics: the state policies (MLP, CNN) are chunk policies themselves.

An ``ActorCriticPolicy`` is a ``ChunkPolicy`` whose actor head outputs all ``chunk_len * action_dim``
means of a chunk at once: one diagonal Gaussian over the flattened chunk, with a state-independent
``log_std``. With ``chunk_len = 1`` it is the state PPO policy, which acts step by step through
``act`` / ``evaluate_actions`` / ``get_value`` (``PolicyStep``, the fast state path); chunk RL and
SFT use the ``ChunkPolicy`` methods, under the registry name ``gaussian`` (config
``GaussianChunkConfig``, saved as ``gaussian_chunk_config.json`` next to the weights). Chunk
log-probabilities are per action (``[N, chunk_len]``, summed over the action dims) or per chunk
(``[N]``); ``temperature`` scales the standard deviation.

SFT loss (``sft_loss_type``): ``"nll"`` is the negative log-likelihood of the demonstrated actions
per real action (it also fits ``log_std``); ``"mse"`` is the mean squared error of the mean action
(deterministic behaviour cloning, ``log_std`` untouched).
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import (
    ChunkEvaluation,
    ChunkPolicy,
    ChunkStep,
    SampleInfo,
    SFTOutput,
)
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.layers import is_image_key
from vla_rl.policies.obs_keys import with_env_obs_keys
from vla_rl.policies.pretrained_io import DictConfig, read_module_dir
from vla_rl.registry import resolve

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
ACTOR_OUT_GAIN = 0.01
"""Small last-layer gain: initial action means near zero, so exploration starts from the noise."""
CRITIC_OUT_GAIN = 1.0
GAUSSIAN_POLICIES: dict[str, str] = {
    "mlp": "vla_rl.policies.mlp:GaussianMLPPolicy",
    "cnn": "vla_rl.policies.cnn:GaussianCNNPolicy",
}
"""The Gaussian actor-critics by ``PolicyConfig.name`` (part of ``vla_rl.policies.registry.POLICIES``)."""
CONFIG_FILE = "gaussian_chunk_config.json"
SFT_LOSSES = ("nll", "mse")
WRAPPED_PREFIX = "policy."
"""Prefix of the weights in ``gaussian`` folders written when a chunk policy wrapped the state policy."""


@dataclass
class PolicyStep:
    """One forward pass of the policy on a batch of observations."""

    action: torch.Tensor
    """[N, A] sampled (or deterministic) action, before any clipping to the action bounds."""
    log_prob: torch.Tensor
    """[N] log-density of ``action`` under the policy's distribution."""
    value: torch.Tensor
    """[N] critic estimate of the state value."""
    mean: torch.Tensor
    """[N, A] mean of the diagonal Gaussian (kept for the KL of the adaptive learning rate)."""
    std: torch.Tensor
    """[N, A] standard deviation of the diagonal Gaussian."""


def gaussian_log_prob(action: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Log-density of a diagonal Gaussian, summed over the last (action) dimension."""
    z = (action - mean) / std
    return (-0.5 * z.square() - std.log() - LOG_SQRT_2PI).sum(dim=-1)


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian, summed over the last (action) dimension."""
    return (0.5 + LOG_SQRT_2PI + std.log()).sum(dim=-1)


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


class ActorCriticPolicy(ChunkPolicy):
    """Action chunk ~ N(actor(features), diag(exp(log_std))^2), with a value head.

    Subclasses build their networks from a ``PolicyConfig`` and the spaces of one world, and provide
    ``mean_and_value`` and ``get_value``; everything probabilistic lives here. The class itself is
    the registry's ``gaussian``: ``build`` and ``from_pretrained`` make the ``policy.name`` subclass.
    """

    registry_name = "gaussian"
    log_prob_levels = ("action", "chunk")
    config_file = CONFIG_FILE

    def __init__(
        self,
        cfg: PolicyConfig,
        observation_space: gym.spaces.Dict,
        action_space: gym.spaces.Box,
        chunk_len: int = 1,
        sft_loss_type: str = "nll",
    ) -> None:
        """``action_space`` is the space of one action; the actor outputs ``chunk_len`` of them."""
        super().__init__()
        if len(action_space.shape) != 1:
            raise ValueError(f"action space must be 1-D, got shape {action_space.shape}")
        self.chunk_len = int(chunk_len)
        self.action_dim = int(action_space.shape[0])
        self.log_std = nn.Parameter(torch.full((self.chunk_len * self.action_dim,), float(cfg.init_log_std)))
        self.policy_cfg = with_env_obs_keys(cfg, observation_space)
        """``cfg`` with the observation keys the policy reads filled in from the env."""
        shapes = {k: list(s.shape) for k, s in observation_space.items() if isinstance(s, gym.spaces.Box)}
        self.cfg = GaussianChunkConfig(
            self.chunk_len, self.action_dim, shapes, asdict(self.policy_cfg), sft_loss_type
        )
        """What ``save_pretrained`` writes: the policy's config and the observation shapes."""
        self._build_networks(self.policy_cfg, observation_space)

    def _build_networks(self, cfg: PolicyConfig, observation_space: gym.spaces.Dict) -> None:  # noqa: B027
        """Build the encoders and heads (``cfg`` with its keys filled in); the actor outputs
        ``chunk_len * action_dim`` means. Nothing by default."""

    @abstractmethod
    def mean_and_value(self, obs: Observation) -> tuple[torch.Tensor, torch.Tensor]:
        """[N, chunk_len * action_dim] mean and [N] value, from features computed once."""

    @abstractmethod
    def get_value(self, obs: Observation) -> torch.Tensor:
        """Critic estimate [N]."""

    def auxiliary_loss(self, obs: Observation) -> torch.Tensor | None:
        """A weighted loss the algorithm adds to its own for this minibatch, or None (the default).

        Called right after ``evaluate_actions`` on the same ``obs``, so a policy may reuse the
        features that call computed."""
        return None

    def update_normalizer(self, obs: Observation) -> None:  # noqa: B027 - optional hook
        """Fold ``obs`` into running observation statistics; no-op when normalisation is off."""

    # ----- the state path (PPO on single actions) ------------------------------------------------------

    def act(self, obs: Observation, deterministic: bool = False) -> PolicyStep:
        """Sample an action (the mean if ``deterministic``) with its log-prob and value."""
        mean, value = self.mean_and_value(obs)
        std = self.log_std.exp().expand_as(mean)
        action = mean if deterministic else mean + std * torch.randn_like(mean)
        return PolicyStep(
            action=action, log_prob=gaussian_log_prob(action, mean, std), value=value, mean=mean, std=std
        )

    def evaluate_actions(
        self, obs: Observation, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Return ``(log_prob [N], entropy [N], value [N], mean [N, A], std [N, A])`` of given actions."""
        mean, value = self.mean_and_value(obs)
        std = self.log_std.exp().expand_as(mean)
        return gaussian_log_prob(action, mean, std), gaussian_entropy(std), value, mean, std

    # ----- ChunkPolicy ---------------------------------------------------------------------------------

    @classmethod
    def build(cls, **kwargs: object) -> ActorCriticPolicy:
        """Keywords: ``GaussianChunkConfig`` fields; ``proprio_dim=P`` is short for
        ``obs_shapes={"proprio": [P]}`` and ``policy`` defaults to an MLP on ``proprio``."""
        values = dict(kwargs)
        if "proprio_dim" in values:
            values.setdefault("obs_shapes", {"proprio": [int(values.pop("proprio_dim"))]})  # type: ignore[arg-type]
        policy = dict(values.get("policy") or {})  # type: ignore[call-overload]
        policy.setdefault("actor_obs_keys", ["proprio"])
        values["policy"] = policy
        return cls.from_config(values)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ActorCriticPolicy:
        """The ``policy.name`` policy (``mlp`` or ``cnn``) that a ``GaussianChunkConfig`` describes."""
        chunk = GaussianChunkConfig.from_dict(config)
        policy_cfg = PolicyConfig(**chunk.policy)  # type: ignore[arg-type]
        policy_cls = resolve(GAUSSIAN_POLICIES, policy_cfg.name, "Gaussian policy")
        if not (isinstance(policy_cls, type) and issubclass(policy_cls, cls)):
            raise TypeError(f"policy {policy_cfg.name!r} is not a {cls.__name__}")
        return policy_cls(
            policy_cfg, chunk.observation_space(), chunk.action_space(), chunk.chunk_len, chunk.sft_loss_type
        )

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> ActorCriticPolicy:
        config, state = read_module_dir(directory, cls.config_file)
        policy = cls.from_config(config)
        policy.load_state_dict({name.removeprefix(WRAPPED_PREFIX): value for name, value in state.items()})
        return policy

    def distribution(
        self, obs: Observation, temperature: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean [N, chunk, A], std [N, chunk, A], value [N])."""
        if temperature <= 0.0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        mean, value = self.mean_and_value(obs)
        std = (self.log_std.exp() * temperature).expand_as(mean)
        shape = (mean.shape[0], self.chunk_len, self.action_dim)
        return mean.view(shape), std.reshape(shape), value

    def _log_prob(
        self, actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, level: str
    ) -> torch.Tensor:
        per_action = gaussian_log_prob(actions, mean, std)
        return per_action if level == "action" else per_action.sum(dim=-1)

    def _sample(
        self, obs: Observation, temperature: float, deterministic: bool, level: str, with_value: bool
    ) -> ChunkStep:
        """Actions are the raw Gaussian samples (the env clips to [-1, 1]), as in PPO."""
        mean, std, value = self.distribution(obs, temperature)
        actions = mean if deterministic else mean + std * torch.randn_like(mean)
        return ChunkStep(
            actions=actions,
            log_prob=self._log_prob(actions, mean, std, level),
            value=value if with_value else None,
            sample_info={"actions": actions},
        )

    def _evaluate(
        self, obs: Observation, sample_info: SampleInfo, temperature: float, level: str, with_value: bool
    ) -> ChunkEvaluation:
        mean, std, value = self.distribution(obs, temperature)
        entropy = gaussian_entropy(std)
        return ChunkEvaluation(
            log_prob=self._log_prob(sample_info["actions"], mean, std, level),
            entropy=entropy if level == "action" else entropy.sum(dim=-1),
            value=value if with_value else None,
        )

    def sft_loss(self, obs: Observation, action_chunk: torch.Tensor, chunk_mask: torch.Tensor) -> SFTOutput:
        mean, std, _ = self.distribution(obs, 1.0)
        targets = action_chunk.to(mean.device).float()
        weights = chunk_mask.to(mean.device).to(mean.dtype)
        mse_per_action = (mean - targets).square().mean(dim=-1)
        mse = (mse_per_action * weights).sum() / weights.sum().clamp(min=1.0)
        if self.cfg.sft_loss_type == "mse":
            return SFTOutput(loss=mse, metrics={"mse": float(mse.detach())})
        nll_per_action = -self._log_prob(targets, mean, std, "action")
        nll = (nll_per_action * weights).sum() / weights.sum().clamp(min=1.0)
        return SFTOutput(loss=nll, metrics={"nll": float(nll.detach()), "mse": float(mse.detach())})
