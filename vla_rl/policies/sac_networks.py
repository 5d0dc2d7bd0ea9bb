"""The networks of SAC on flat feature vectors: a tanh-squashed Gaussian actor and an ensemble of Q
critics (with LayerNorm for RLPD, Ball et al. 2023).

Both read features that an observation encoder has already produced (``SACObsEncoder``); the
algorithm decides which gradients reach that encoder.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import torch
import torch.nn.functional as F
from torch import nn

from vla_rl.envs.base import Observation
from vla_rl.policies.layers import (
    HIDDEN_INIT_GAIN,
    activation_class,
    build_mlp,
    check_obs_keys,
    orthogonal_linear,
)
from vla_rl.policies.sac_encoder import (
    DEFAULT_CNN_CHANNELS,
    DEFAULT_CNN_FEATURE_DIM,
    DEFAULT_CNN_KERNEL_STRIDE,
    SACObsEncoder,
)

LOG_STD_MIN = -5.0
LOG_STD_MAX = 2.0
ACTOR_OUT_GAIN = 0.01
"""Small last layer: the first policy is centred on zero with ``log_std`` near 0."""
CRITIC_OUT_GAIN = 1.0
LOG_2 = math.log(2.0)
ATANH_BOUND = 0.999
"""A given action's largest magnitude in :meth:`SquashedGaussianActor.log_prob`: an action stored at
+-1 (clipped) counts as +-0.999, whose pre-tanh value (3.8) is already saturated, not as +-infinity."""


def tanh_log_abs_det_jacobian(pre_tanh: torch.Tensor) -> torch.Tensor:
    """``log(1 - tanh(u)^2)`` per element, as ``2 (log 2 - u - softplus(-2u))``.

    The two are equal (``1 - tanh(u)^2 = 4 / (e^u + e^-u)^2``); the second stays finite where
    ``tanh(u)`` rounds to +-1 and the first would be ``log 0``.
    """
    return 2.0 * (LOG_2 - pre_tanh - F.softplus(-2.0 * pre_tanh))


def squashed_gaussian_log_prob(
    mean: torch.Tensor, log_std: torch.Tensor, pre_tanh: torch.Tensor
) -> torch.Tensor:
    """``log pi(tanh(u))`` [B] of the action ``tanh(u)``, ``u ~ N(mean, exp(log_std)^2)`` per dimension:
    the Gaussian log-density of ``u`` minus the log-Jacobian of the tanh, summed over the action."""
    gaussian = torch.distributions.Normal(mean, log_std.exp()).log_prob(pre_tanh)
    return (gaussian - tanh_log_abs_det_jacobian(pre_tanh)).sum(dim=-1)


class SquashedGaussianActor(nn.Module):
    """An MLP from features [B, F] to a diagonal Gaussian over pre-tanh actions; actions are the tanh of
    a sample, in [-1, 1]."""

    def __init__(
        self,
        feature_dim: int,
        action_dim: int,
        hidden_sizes: list[int],
        activation: str = "relu",
        log_std_min: float = LOG_STD_MIN,
        log_std_max: float = LOG_STD_MAX,
    ) -> None:
        super().__init__()
        if log_std_min >= log_std_max:
            raise ValueError(f"log_std_min {log_std_min} must be below log_std_max {log_std_max}")
        self.action_dim = action_dim
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        self.net = build_mlp(feature_dim, list(hidden_sizes), 2 * action_dim, activation, ACTOR_OUT_GAIN)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log std [B, A] of the pre-tanh Gaussian (log std clamped to its range)."""
        mean, log_std = self.net(features).chunk(2, dim=-1)
        return mean, log_std.clamp(self.log_std_min, self.log_std_max)

    def sample(
        self, features: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action ``tanh(mean + std * noise)`` [B, A] and its log-probability [B];
        ``generator`` (on the features' device) draws the noise."""
        mean, log_std = self(features)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        pre_tanh = mean + log_std.exp() * noise
        return torch.tanh(pre_tanh), squashed_gaussian_log_prob(mean, log_std, pre_tanh)

    def log_prob(self, features: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``log pi(action)`` [B] of given actions [B, A] in [-1, 1] (clamped to +-``ATANH_BOUND``);
        differentiable in the mean and the width."""
        mean, log_std = self(features)
        pre_tanh = torch.atanh(action.clamp(-ATANH_BOUND, ATANH_BOUND))
        return squashed_gaussian_log_prob(mean, log_std, pre_tanh)

    def deterministic(self, features: torch.Tensor) -> torch.Tensor:
        """The action of the Gaussian's mean, ``tanh(mean)`` [B, A] (for evaluation)."""
        mean, _ = self(features)
        return torch.tanh(mean)


def critic_mlp(in_dim: int, hidden_sizes: list[int], activation: str, layer_norm: bool) -> nn.Sequential:
    """One Q network ``in_dim -> 1``: each hidden linear layer followed by a LayerNorm (when
    ``layer_norm``) and the activation; orthogonal weights as in ``build_mlp``."""
    if not layer_norm:
        return build_mlp(in_dim, list(hidden_sizes), 1, activation, CRITIC_OUT_GAIN)
    act = activation_class(activation)
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_sizes:
        layers += [orthogonal_linear(width, hidden, HIDDEN_INIT_GAIN), nn.LayerNorm(hidden), act()]
        width = hidden
    layers.append(orthogonal_linear(width, 1, CRITIC_OUT_GAIN))
    return nn.Sequential(*layers)


class CriticEnsemble(nn.Module):
    """``num_critics`` independently initialised Q networks on ``concat(features, action)``."""

    def __init__(
        self,
        feature_dim: int,
        action_dim: int,
        hidden_sizes: list[int],
        num_critics: int = 2,
        activation: str = "relu",
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        if num_critics < 1:
            raise ValueError(f"num_critics must be >= 1, got {num_critics}")
        self.num_critics = num_critics
        self.critics = nn.ModuleList(
            critic_mlp(feature_dim + action_dim, hidden_sizes, activation, layer_norm)
            for _ in range(num_critics)
        )

    def forward(
        self, features: torch.Tensor, action: torch.Tensor, members: list[int] | None = None
    ) -> torch.Tensor:
        """Q values [E, B] of every critic, or [len(members), B] of the critics ``members`` only."""
        inputs = torch.cat([features, action], dim=-1)
        chosen = self.critics if members is None else [self.critics[index] for index in members]
        return torch.stack([critic(inputs).squeeze(-1) for critic in chosen])


@dataclass
class ActionStep:
    """What :meth:`SACPolicy.sample` returns: one action per world, as a chunk of one."""

    actions: torch.Tensor
    """float32 [N, 1, action_dim] in [-1, 1]."""


class SACPolicy(nn.Module):
    """An off-policy learner's networks as one module: the observation encoder (``SACObsEncoder``:
    vector keys as they are, camera keys through a convolutional encoder), the squashed Gaussian
    actor and an ensemble of ``num_critics`` critics. Its ``state_dict`` is the checkpoint's
    ``policy.safetensors``; :meth:`sample` lets the evaluation run it as a chunk policy of one action
    (``vla_rl.training.executors``). The ``cnn_*`` settings apply only when ``obs_keys`` name
    ``rgb_*`` cameras."""

    chunk_len = 1

    def __init__(
        self,
        obs_keys: list[str],
        observation_space: gym.spaces.Dict,
        action_dim: int,
        hidden_sizes: list[int],
        num_critics: int = 2,
        layer_norm: bool = False,
        activation: str = "relu",
        cnn_channels: list[int] | tuple[int, ...] = DEFAULT_CNN_CHANNELS,
        cnn_kernel_stride: list[list[int]] | tuple[tuple[int, int], ...] = DEFAULT_CNN_KERNEL_STRIDE,
        cnn_feature_dim: int = DEFAULT_CNN_FEATURE_DIM,
    ) -> None:
        super().__init__()
        self.obs_keys = list(obs_keys)
        check_obs_keys(self.obs_keys, observation_space, "off-policy learner")
        self.encoder = SACObsEncoder(
            self.obs_keys, observation_space, cnn_channels, cnn_kernel_stride, cnn_feature_dim, activation
        )
        features = self.encoder.output_dim
        self.actor = SquashedGaussianActor(features, action_dim, hidden_sizes, activation)
        self.critic = CriticEnsemble(features, action_dim, hidden_sizes, num_critics, activation, layer_norm)
        self.action_dim = action_dim

    def encode(self, obs: Observation) -> torch.Tensor:
        """Features [N, F]: the image features of the cameras (if any), then the vector keys flattened
        and concatenated in the order of ``obs_keys``."""
        return self.encoder(obs)

    def acting(self) -> nn.ModuleDict:
        """What an actor needs to act, sharing this module's parameters: the observation encoder (its
        camera convolutions, trained by the critic loss) and the actor. Its ``state_dict`` is what a
        learner publishes to remote actors."""
        return nn.ModuleDict({"encoder": self.encoder, "actor": self.actor})

    def encode_for_algorithm(self) -> Callable[[Observation], torch.Tensor]:
        """What SAC is given as ``encode``: the encoder module when it has weights (cameras), so that
        the critic loss trains it and SAC's checkpoint holds its optimiser state; otherwise the
        parameter-free :meth:`encode`."""
        return self.encoder if self.encoder.image_keys else self.encode

    @torch.no_grad()
    def sample(self, obs: Observation, temperature: float = 1.0, deterministic: bool = True) -> ActionStep:
        """``tanh(mean)`` when ``deterministic``, else a sample (``temperature`` is not used: SAC's
        temperature is learned and lives in the algorithm)."""
        features = self.encode(obs)
        action = self.actor.deterministic(features) if deterministic else self.actor.sample(features)[0]
        return ActionStep(action[:, None, :])
