"""Gaussian MLP actor-critic on vector observations (optionally asymmetric)."""

from __future__ import annotations

import gymnasium as gym
import torch

from vla_rl.envs.base import Observation
from vla_rl.policies.base import ACTOR_OUT_GAIN, CRITIC_OUT_GAIN, ActorCriticPolicy
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.layers import VectorObsEncoder, build_mlp, check_obs_keys, is_image_key


class GaussianMLPPolicy(ActorCriticPolicy):
    """Separate actor and critic MLPs over concatenated (normalised) vector observation keys.

    The critic may read different keys than the actor, e.g. privileged task state.
    """

    registry_name = "mlp"

    def _build_networks(self, cfg: PolicyConfig, observation_space: gym.spaces.Dict) -> None:
        self.actor_keys = list(cfg.actor_obs_keys or [])
        self.critic_keys = list(cfg.critic_obs_keys) if cfg.critic_obs_keys is not None else self.actor_keys
        check_obs_keys(self.actor_keys, observation_space, "actor")
        check_obs_keys(self.critic_keys, observation_space, "critic")
        images = [k for k in self.actor_keys + self.critic_keys if is_image_key(k)]
        if images:
            raise ValueError(f"policy 'mlp' takes vector observations only; use 'cnn' for {images}")
        self.obs_encoder = VectorObsEncoder(
            self.actor_keys + self.critic_keys, observation_space, cfg.normalize_obs
        )
        self.actor = build_mlp(
            self.obs_encoder.output_dim(self.actor_keys),
            cfg.head_sizes(),
            self.chunk_len * self.action_dim,
            cfg.activation,
            ACTOR_OUT_GAIN,
        )
        critic_in = self.obs_encoder.output_dim(self.critic_keys)
        self.critic = build_mlp(critic_in, cfg.head_sizes(), 1, cfg.activation, CRITIC_OUT_GAIN)

    def get_value(self, obs: Observation) -> torch.Tensor:
        return self.critic(self.obs_encoder.encode(obs, self.critic_keys)).squeeze(-1)

    def mean_and_value(self, obs: Observation) -> tuple[torch.Tensor, torch.Tensor]:
        actor_in = self.obs_encoder.encode(obs, self.actor_keys)
        critic_in = (
            actor_in
            if self.critic_keys == self.actor_keys
            else self.obs_encoder.encode(obs, self.critic_keys)
        )
        return self.actor(actor_in), self.critic(critic_in).squeeze(-1)

    def update_normalizer(self, obs: Observation) -> None:
        self.obs_encoder.update(obs)
