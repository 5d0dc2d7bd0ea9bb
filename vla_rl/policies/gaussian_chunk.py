"""The Gaussian MLP/CNN actor-critics of ``vla_rl.policies`` behind the ChunkPolicy interface.

The wrapped policy is built by ``vla_rl.policies.build_policy`` with an action space of
``chunk_len * action_dim`` values: with ``chunk_len = 1`` it is exactly the PPO policy; with a longer
chunk its actor head outputs all ``chunk_len * action_dim`` means at once (one diagonal Gaussian over
the flattened chunk). Log-probabilities are per action (``[N, chunk_len]``, summed over the action
dims) or per chunk (``[N]``). ``temperature`` scales the standard deviation.

SFT loss (``sft_loss_type``): ``"nll"`` is the negative log-likelihood of the demonstrated actions
per real action (it also fits ``log_std``); ``"mse"`` is the mean squared error of the mean action
(deterministic behaviour cloning, ``log_std`` untouched).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from vla_rl.envs.base import Observation
from vla_rl.policies.chunk_policy import (
    ChunkEvaluation,
    ChunkPolicy,
    ChunkStep,
    SFTOutput,
    check_log_prob_level,
)
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.gaussian import LOG_SQRT_2PI, GaussianActorCritic
from vla_rl.policies.layers import is_image_key
from vla_rl.policies.pretrained_io import read_module_dir, save_module_dir
from vla_rl.policies.registry import build_policy

CONFIG_FILE = "gaussian_chunk_config.json"
SFT_LOSSES = ("nll", "mse")


@dataclass
class GaussianChunkConfig:
    """The wrapped policy's config plus the observation shapes it is built for."""

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

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> GaussianChunkConfig:
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"unknown GaussianChunkConfig fields {sorted(unknown)}")
        return cls(**data)  # type: ignore[arg-type]

    def observation_space(self) -> gym.spaces.Dict:
        spaces = {}
        for key, shape in self.obs_shapes.items():
            if is_image_key(key):
                spaces[key] = gym.spaces.Box(0, 255, tuple(shape), np.uint8)
            else:
                spaces[key] = gym.spaces.Box(-np.inf, np.inf, tuple(shape), np.float32)
        return gym.spaces.Dict(spaces)

    def action_space(self) -> gym.spaces.Box:
        return gym.spaces.Box(-1.0, 1.0, (self.chunk_len * self.action_dim,), np.float32)


@dataclass
class GaussianChunkBuildSettings(GaussianChunkConfig):
    """The construction values of ``gaussian`` (an SFT config's ``policy.kwargs``, the keywords of
    ``build``): the ``GaussianChunkConfig`` fields with the wrapped policy's typed, plus a shorthand."""

    policy: PolicyConfig = field(default_factory=lambda: PolicyConfig(actor_obs_keys=["proprio"]))  # type: ignore[assignment]
    """The wrapped Gaussian policy's ``PolicyConfig`` fields (``name``: ``mlp`` or ``cnn``, keys,
    hidden sizes, ...); the actor reads ``proprio`` unless ``actor_obs_keys`` says otherwise."""
    proprio_dim: int | None = None
    """Short for ``obs_shapes: {proprio: [proprio_dim]}`` (ignored when ``obs_shapes`` is given)."""


class GaussianChunkPolicy(ChunkPolicy):
    """A ``GaussianActorCritic`` producing flattened chunks, reshaped to [N, chunk_len, action_dim]."""

    registry_name = "gaussian"

    log_prob_levels = ("action", "chunk")

    def __init__(self, cfg: GaussianChunkConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.chunk_len = cfg.chunk_len
        self.action_dim = cfg.action_dim
        policy = build_policy(PolicyConfig(**cfg.policy), cfg.observation_space(), cfg.action_space())
        if not isinstance(policy, GaussianActorCritic):
            raise TypeError(f"policy {cfg.policy.get('name')!r} is not a Gaussian actor-critic")
        self.policy = policy

    @classmethod
    def build(cls, **kwargs: object) -> GaussianChunkPolicy:
        """Keywords: ``GaussianChunkConfig`` fields; ``proprio_dim=P`` is short for
        ``obs_shapes={"proprio": [P]}`` and ``policy`` defaults to an MLP on ``proprio``."""
        values = dict(kwargs)
        if "proprio_dim" in values:
            values.setdefault("obs_shapes", {"proprio": [int(values.pop("proprio_dim"))]})  # type: ignore[arg-type]
        policy = dict(values.get("policy") or {})  # type: ignore[call-overload]
        policy.setdefault("actor_obs_keys", ["proprio"])
        values["policy"] = policy
        return cls(GaussianChunkConfig.from_dict(values))

    def distribution(
        self, obs: Observation, temperature: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean [N, chunk, A], std [N, chunk, A], value [N])."""
        if temperature <= 0.0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        mean, value = self.policy.mean_and_value(obs)
        std = (self.policy.log_std.exp() * temperature).expand_as(mean)
        shape = (mean.shape[0], self.chunk_len, self.action_dim)
        return mean.view(shape), std.reshape(shape), value

    def _log_prob(
        self, actions: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, level: str
    ) -> torch.Tensor:
        z = (actions - mean) / std
        per_action = (-0.5 * z.square() - std.log() - LOG_SQRT_2PI).sum(dim=-1)
        return per_action if level == "action" else per_action.sum(dim=-1)

    def sample(
        self,
        obs: Observation,
        *,
        temperature: float = 1.0,
        deterministic: bool = False,
        log_prob_level: str = "chunk",
        with_value: bool = False,
    ) -> ChunkStep:
        """Actions are the raw Gaussian samples (the env clips to [-1, 1]), as in PPO."""
        check_log_prob_level(self, log_prob_level)
        with torch.no_grad():
            mean, std, value = self.distribution(obs, temperature)
            actions = mean if deterministic else mean + std * torch.randn_like(mean)
            log_prob = self._log_prob(actions, mean, std, log_prob_level)
        return ChunkStep(
            actions=actions,
            log_prob=log_prob,
            value=value if with_value else None,
            sample_info={"actions": actions},
        )

    def evaluate(
        self,
        obs: Observation,
        sample_info: dict[str, torch.Tensor],
        *,
        temperature: float = 1.0,
        log_prob_level: str = "chunk",
        with_value: bool = False,
    ) -> ChunkEvaluation:
        check_log_prob_level(self, log_prob_level)
        mean, std, value = self.distribution(obs, temperature)
        per_entry_entropy = 0.5 + LOG_SQRT_2PI + std.log()
        entropy = per_entry_entropy.sum(dim=-1)
        return ChunkEvaluation(
            log_prob=self._log_prob(sample_info["actions"], mean, std, log_prob_level),
            entropy=entropy if log_prob_level == "action" else entropy.sum(dim=-1),
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

    def update_normalizer(self, obs: Observation) -> None:
        self.policy.update_normalizer(obs)

    def save_pretrained(self, directory: str | Path) -> None:
        save_module_dir(self, self.cfg.to_dict(), directory, CONFIG_FILE)

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> GaussianChunkPolicy:
        config, state = read_module_dir(directory, CONFIG_FILE)
        policy = cls(GaussianChunkConfig.from_dict(config))
        policy.load_state_dict(state)
        return policy
