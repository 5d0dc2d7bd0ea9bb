"""An imported checkpoint fitted to the run's env: the ``policy.action_map`` / ``state_map`` /
``camera_map`` settings handed to the policy, and its check against the env before any work."""

from __future__ import annotations

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import BatchedEnv
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.policies.env_maps import EnvInterface, EnvMaps, EnvMapSettings


def apply_env_maps(policy: ChunkPolicy, settings: EnvMapSettings, family: str) -> None:
    """The maps of ``settings`` that are set, on ``policy`` (replacing those it was saved with; those
    not set keep the saved ones); a ``ConfigError`` for a family that takes none."""
    maps = EnvMaps.of(settings)
    if not maps.given():
        return
    set_maps = getattr(policy, "set_env_maps", None)
    if set_maps is None:
        raise ConfigError(
            f"config key '{maps.given()[0]}': {family} policies take no maps (the maps fit a LeRobot "
            "pi0 / pi05 import to the env)"
        )
    set_maps(maps)


def check_policy_env(policy: ChunkPolicy, env: BatchedEnv) -> None:
    """``policy.check_env`` with ``env``'s action width, vector observations and cameras."""
    policy.check_env(EnvInterface.of_spaces(env.observation_space, env.action_space))
