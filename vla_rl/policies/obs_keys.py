"""Which observation keys a Gaussian policy reads when its config leaves them to the environment.

``PolicyConfig.actor_obs_keys: None`` means "what the env provides", so that any environment (a
built-in simulator or a wrapped Gymnasium id) trains without naming its keys:

* ``mlp`` reads the env's state: ``proprio`` and ``privileged`` (the contract's two state vectors,
  ``vla_rl.envs.base``), those of them the env has; an env with neither (a foreign Dict
  observation) gives every vector key it provides.
* ``cnn`` reads every ``rgb_*`` image plus the same state keys except ``privileged``: the
  simulator's ground truth is for critics and auxiliary losses, not for a pixel actor.

Keys named explicitly are used as given; ``obs_key_errors`` lists those the env lacks.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym

from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.layers import is_image_key

STATE_OBS_KEYS = ("proprio", "privileged")
"""The contract's state vectors, in the order the default actor reads them."""
PRIVILEGED_OBS_KEY = "privileged"
"""Simulator ground truth: read by the default ``mlp`` actor, never by the default ``cnn`` actor."""
MISSING_KEY_HINTS = {
    "actor_obs_keys": "; null reads the env's own keys",
    "critic_obs_keys": "; null reads the actor's keys",
    "aux_target_key": "; null turns the auxiliary loss off",
}
"""What setting each key field to null does, appended to the error for a key the env lacks."""


def vector_obs_keys(observation_space: gym.spaces.Dict) -> list[str]:
    """Box keys that are not images, in the space's order."""
    return [
        key
        for key, space in observation_space.spaces.items()
        if isinstance(space, gym.spaces.Box) and not is_image_key(key)
    ]


def image_obs_keys(observation_space: gym.spaces.Dict) -> list[str]:
    """``rgb_*`` keys, in the space's order."""
    return [key for key in observation_space.spaces if is_image_key(key)]


def state_obs_keys(observation_space: gym.spaces.Dict) -> list[str]:
    """``proprio`` and ``privileged`` where the env has either, else every vector key."""
    vectors = vector_obs_keys(observation_space)
    state = [key for key in STATE_OBS_KEYS if key in vectors]
    return state or vectors


def default_actor_obs_keys(policy_name: str, observation_space: gym.spaces.Dict) -> list[str]:
    """The keys an actor of ``policy_name`` reads when ``actor_obs_keys`` is ``None`` (module doc)."""
    state = state_obs_keys(observation_space)
    if policy_name == "cnn":
        return image_obs_keys(observation_space) + [key for key in state if key != PRIVILEGED_OBS_KEY]
    return state


def with_env_obs_keys(cfg: PolicyConfig, observation_space: gym.spaces.Dict) -> PolicyConfig:
    """``cfg`` with ``actor_obs_keys`` filled in from the env where it is ``None``."""
    if cfg.actor_obs_keys is not None:
        return cfg
    return dataclasses.replace(cfg, actor_obs_keys=default_actor_obs_keys(cfg.name, observation_space))


def obs_key_errors(cfg: PolicyConfig, observation_space: gym.spaces.Dict) -> list[tuple[str, str]]:
    """(config key below ``policy``, message) for every key the env does not provide, and for an
    actor left without any key; empty when the policy can be built on this env."""
    provided = f"(it provides {list(observation_space.spaces)})"
    errors: list[tuple[str, str]] = []
    if not with_env_obs_keys(cfg, observation_space).actor_obs_keys:
        hint = "; use policy=cnn for images" if image_obs_keys(observation_space) else ""
        errors.append(("actor_obs_keys", f"no observation policy {cfg.name!r} reads {provided}{hint}"))
    named = [
        ("actor_obs_keys", cfg.actor_obs_keys or []),
        ("critic_obs_keys", cfg.critic_obs_keys or []),
        ("aux_target_key", [cfg.aux_target_key] if cfg.aux_target_key is not None else []),
    ]
    for field_name, keys in named:
        for key in keys:
            if key not in observation_space.spaces:
                message = f"the env has no observation {key!r} {provided}{MISSING_KEY_HINTS[field_name]}"
                errors.append((field_name, message))
    return errors
