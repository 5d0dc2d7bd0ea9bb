"""How an imported checkpoint meets an environment it was not trained on: ``policy.action_map``,
``policy.state_map`` and ``policy.camera_map``, and the errors when they are needed and missing.

A LeRobot checkpoint has its own action width (7 for end-effector deltas with rotation and a
gripper), its own state vector and its own camera names; an environment here has its own (4 actions
for ``ee_delta_pos``, a 24-wide ``proprio``, cameras ``front`` / ``top`` / ``wrist``). Nothing is
guessed: where the two differ, the run stops before training with a ``ConfigError`` naming the map to
give, and the maps say exactly which dimension goes where.

* ``DimensionMap`` (``policy.action_map``, ``policy.state_map``): one ``index`` entry per dimension of
  the vector that *receives*, giving the dimension of the vector that *gives* it its value, or null
  for ``fill``. The action map receives the env's action (entry i: the checkpoint's action dimension
  that env action dimension i takes); the state map receives the checkpoint's state (entry j: the env
  state dimension that checkpoint state dimension j reads). Giving dimensions nobody takes are dropped.
* ``camera_map``: checkpoint camera (its name, or its image key ``observation.images.<name>``) -> the
  env camera it reads (``obs["rgb_<camera>"]``), or null: the camera is left out, as LeRobot masks a
  camera its observation lacks. Cameras not named read the env camera of the same name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.config.structured import ConfigError
from vla_rl.envs.base import Observation

IMAGE_PREFIX = "observation.images."
"""LeRobot's image keys: ``observation.images.<camera>``."""
RGB_PREFIX = "rgb_"
"""Our observations' camera keys: ``rgb_<camera>``."""
ACTION_MAP_KEY = "policy.action_map"
STATE_MAP_KEY = "policy.state_map"
CAMERA_MAP_KEY = "policy.camera_map"


@dataclass
class DimensionMap:
    """Which dimension of one vector fills each dimension of another (see the module docstring)."""

    index: list[int | None] | None = None
    """One entry per dimension of the receiving vector: the index (from 0) of the giving vector's
    dimension copied into it, or null for ``fill``. None: no map (the widths must agree)."""
    fill: float = 0.0
    """The value of the receiving dimensions whose entry is null, in the receiving vector's units
    before any normalisation (env action units for ``action_map``, the checkpoint's raw state units
    for ``state_map``)."""

    @property
    def given(self) -> bool:
        return self.index is not None

    def width(self, unmapped: int) -> int:
        """The receiving vector's width: the map's length, else ``unmapped`` (no map)."""
        return len(self.index) if self.index is not None else unmapped

    def apply(self, values: torch.Tensor) -> torch.Tensor:
        """Giving vectors [..., G] -> receiving vectors [..., len(index)] (``values`` unchanged
        without a map)."""
        if self.index is None:
            return values
        columns = [
            values[..., i] if i is not None else torch.full_like(values[..., 0], self.fill)
            for i in self.index
        ]
        return torch.stack(columns, dim=-1)

    def scatter(self, values: torch.Tensor, giving_width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The inverse direction, for demonstrations: receiving vectors [..., len(index)] -> giving
        vectors [..., giving_width] (a dimension taken twice gets the later value; one taken by
        none is 0) and a bool [giving_width] mask of the giving dimensions that were taken."""
        if self.index is None:
            return values, torch.ones(giving_width, dtype=torch.bool, device=values.device)
        out = values.new_zeros(*values.shape[:-1], giving_width)
        taken = torch.zeros(giving_width, dtype=torch.bool, device=values.device)
        for receiving, giving in enumerate(self.index):
            if giving is not None:
                out[..., giving] = values[..., receiving]
                taken[giving] = True
        return out, taken

    def check_range(self, key: str, giving_width: int, giving: str) -> None:
        """``ConfigError`` naming ``key`` for an entry outside the giving vector's ``giving_width``."""
        if self.index is None:
            return
        wrong = [(n, i) for n, i in enumerate(self.index) if i is not None and not 0 <= i < giving_width]
        if wrong:
            entries = ", ".join(f"entry {n} is {i}" for n, i in wrong)
            raise ConfigError(
                f"config key '{key}.index': {entries}; {giving} has {giving_width} dimensions "
                f"(indices 0..{giving_width - 1})"
            )


def _dimension_map(value: DimensionMap | dict[str, Any] | None) -> DimensionMap:
    if value is None:
        return DimensionMap()
    return value if isinstance(value, DimensionMap) else DimensionMap(**value)


@dataclass
class EnvMapSettings:
    """The three maps between an environment and an imported checkpoint (the ``policy`` settings of
    the RL and SFT configs)."""

    action_map: DimensionMap = field(default_factory=DimensionMap)
    """Env action dimension i <- the checkpoint's action dimension ``index[i]`` (null: the constant
    ``fill``, in env units); checkpoint dimensions no entry takes are dropped when acting and left out
    of the log-probability and the SFT loss. E.g. ``{index: [0, 1, 2, 6]}`` runs a 7-dim
    ``[dx, dy, dz, droll, dpitch, dyaw, gripper]`` checkpoint on a 4-dim ``ee_delta_pos`` env."""
    state_map: DimensionMap = field(default_factory=DimensionMap)
    """The checkpoint's state dimension j <- the env state dimension ``index[j]`` (the concatenated
    ``state_keys``, ``proprio`` by default; null: ``fill``, in the checkpoint's raw state units); one
    entry per checkpoint state dimension."""
    camera_map: dict[str, str | None] | None = None
    """Checkpoint camera (name or ``observation.images.<name>``) -> env camera it reads, or null to
    leave it out, e.g. ``{front: top, wrist: null}``; cameras not named read the env camera of the
    same name. None: no map."""


@dataclass
class EnvMaps(EnvMapSettings):
    """``EnvMapSettings`` as an imported policy holds them: part of its config, saved with its
    checkpoints, so a resumed run, an evaluation and a deployment map the same way."""

    def __post_init__(self) -> None:
        self.action_map = _dimension_map(self.action_map)
        self.state_map = _dimension_map(self.state_map)
        self.camera_map = dict(self.camera_map or {})

    @classmethod
    def of(cls, settings: EnvMapSettings) -> EnvMaps:
        """The maps of a config section (``RLPolicyConfig``, ``SFTPolicyConfig``)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(EnvMapSettings)})

    def given(self) -> list[str]:
        """The config keys of the maps that are set."""
        keys = []
        if self.action_map.given:
            keys.append(ACTION_MAP_KEY)
        if self.state_map.given:
            keys.append(STATE_MAP_KEY)
        if self.camera_map:
            keys.append(CAMERA_MAP_KEY)
        return keys

    def over(self, saved: EnvMaps) -> EnvMaps:
        """These maps where set, ``saved``'s (the checkpoint's) where not."""
        return EnvMaps(
            action_map=self.action_map if self.action_map.given else saved.action_map,
            state_map=self.state_map if self.state_map.given else saved.state_map,
            camera_map=self.camera_map or saved.camera_map,
        )


@dataclass(frozen=True)
class CheckpointInterface:
    """What an imported checkpoint reads and writes, in its own terms."""

    action_dim: int
    """Width of the checkpoint's actions (before padding to the model's width)."""
    state_dim: int
    """Width of the checkpoint's state (0: it reads none)."""
    cameras: list[str]
    """The checkpoint's camera names, in its order."""


@dataclass(frozen=True)
class EnvInterface:
    """What an environment (or demonstrations it recorded) gives a policy and takes from it."""

    action_dim: int
    """Width of the env's actions."""
    vector_dims: dict[str, int]
    """Vector observation key (``proprio``, ``objects``, ...) -> its width."""
    cameras: list[str]
    """Camera names (``obs["rgb_<name>"]``)."""
    source: str = "the env"
    """What the interface describes, for messages."""

    @property
    def owner(self) -> str:
        """``source`` as a possessive (``the env's``, ``the demonstrations'``)."""
        return f"{self.source}'" if self.source.endswith("s") else f"{self.source}'s"

    @classmethod
    def of_spaces(cls, observation_space: gym.spaces.Dict, action_space: gym.spaces.Box) -> EnvInterface:
        vectors, cameras = {}, []
        for key, space in observation_space.spaces.items():
            if key.startswith(RGB_PREFIX):
                cameras.append(key.removeprefix(RGB_PREFIX))
            elif isinstance(space, gym.spaces.Box):
                vectors[key] = int(torch.Size(space.shape).numel())
        return cls(int(action_space.shape[0]), vectors, cameras)

    @classmethod
    def of_observation(cls, obs: Observation, action_dim: int, source: str) -> EnvInterface:
        """The interface of a batched observation (``rgb_<camera>`` images, [N, D] vectors) and
        ``action_dim``-wide actions, e.g. of demonstrations."""
        cameras = [key.removeprefix(RGB_PREFIX) for key in obs if key.startswith(RGB_PREFIX)]
        vectors = {
            key: int(torch.as_tensor(value)[0].numel())
            for key, value in obs.items()
            if not key.startswith(RGB_PREFIX) and isinstance(value, torch.Tensor | np.ndarray)
        }
        return cls(int(action_dim), vectors, cameras, source)


def checkpoint_camera_name(key: str) -> str:
    """A ``camera_map`` key as a camera name (``observation.images.front`` -> ``front``)."""
    return key.removeprefix(IMAGE_PREFIX)


def check_against_checkpoint(maps: EnvMaps, checkpoint: CheckpointInterface) -> None:
    """The maps' references to the checkpoint: action indices within its actions, one state entry per
    checkpoint state dimension, camera_map keys that are its cameras."""
    maps.action_map.check_range(ACTION_MAP_KEY, checkpoint.action_dim, "the checkpoint's action")
    if maps.state_map.given and len(maps.state_map.index or []) != checkpoint.state_dim:
        raise ConfigError(
            f"config key '{STATE_MAP_KEY}.index': has {len(maps.state_map.index or [])} entries; it needs "
            f"one per checkpoint state dimension ({checkpoint.state_dim})"
        )
    unknown = [
        key for key in (maps.camera_map or {}) if checkpoint_camera_name(key) not in checkpoint.cameras
    ]
    if unknown:
        raise ConfigError(
            f"config key '{CAMERA_MAP_KEY}': {unknown} are not cameras of the checkpoint (it has "
            f"{checkpoint.cameras})"
        )


def env_cameras(maps: EnvMaps, checkpoint: CheckpointInterface) -> list[str | None]:
    """Per checkpoint camera, the env camera it reads (None: left out)."""
    named = {checkpoint_camera_name(key): value for key, value in (maps.camera_map or {}).items()}
    return [named.get(camera, camera) for camera in checkpoint.cameras]


def check_env_fit(maps: EnvMaps, checkpoint: CheckpointInterface, env: EnvInterface, state_dim: int) -> None:
    """``ConfigError`` (naming the key to set and both sides) where the checkpoint and ``env`` do not
    meet through ``maps``; ``state_dim``: the width of the env state the policy builds."""
    check_against_checkpoint(maps, checkpoint)
    _check_actions(maps.action_map, checkpoint, env)
    _check_state(maps.state_map, checkpoint, env, state_dim)
    _check_cameras(maps, checkpoint, env)


def _check_actions(action_map: DimensionMap, checkpoint: CheckpointInterface, env: EnvInterface) -> None:
    if not action_map.given:
        if checkpoint.action_dim != env.action_dim:
            raise ConfigError(
                f"config key '{ACTION_MAP_KEY}': the checkpoint's actions have {checkpoint.action_dim} "
                f"dimensions, {env.owner} {env.action_dim}; give {ACTION_MAP_KEY}.index with one "
                f"checkpoint action dimension per env action dimension (e.g. [0, 1, 2, 6] for xyz and the "
                "gripper of a 7-dim checkpoint on a 4-dim ee_delta_pos env)"
            )
        return
    if action_map.width(0) != env.action_dim:
        raise ConfigError(
            f"config key '{ACTION_MAP_KEY}.index': has {action_map.width(0)} entries; {env.owner} "
            f"actions have {env.action_dim} dimensions (one entry per env action dimension)"
        )


def _check_state(
    state_map: DimensionMap, checkpoint: CheckpointInterface, env: EnvInterface, state_dim: int
) -> None:
    if not state_map.given:
        if checkpoint.state_dim != state_dim:
            raise ConfigError(
                f"config key '{STATE_MAP_KEY}': the checkpoint's state has {checkpoint.state_dim} "
                f"dimensions, {env.owner} state {state_dim}; give {STATE_MAP_KEY}.index with one env "
                "state dimension (or null) per checkpoint state dimension"
            )
        return
    state_map.check_range(STATE_MAP_KEY, state_dim, f"{env.owner} state")


def _check_cameras(maps: EnvMaps, checkpoint: CheckpointInterface, env: EnvInterface) -> None:
    sources = env_cameras(maps, checkpoint)
    missing = [
        (camera, source)
        for camera, source in zip(checkpoint.cameras, sources, strict=True)
        if source is not None and source not in env.cameras
    ]
    if missing:
        mapped = {camera: source for camera, source in missing if camera != source}
        absent = [camera for camera, source in missing if camera == source]
        parts = []
        if absent:
            parts.append(f"the checkpoint's cameras {absent} are not cameras of {env.source}")
        if mapped:
            parts.append(f"the cameras it maps to ({mapped}) are not cameras of {env.source}")
        raise ConfigError(
            f"config key '{CAMERA_MAP_KEY}': {'; '.join(parts)} (it has {env.cameras}); map each to an "
            f"env camera or to null to leave it out, e.g. {CAMERA_MAP_KEY}={{{missing[0][0]}: "
            f"{env.cameras[0] if env.cameras else 'null'}}}"
        )
    if checkpoint.cameras and all(source is None for source in sources):
        raise ConfigError(
            f"config key '{CAMERA_MAP_KEY}': leaves out every camera of the checkpoint; it needs at least one"
        )
