"""The task interface: scene contents, per-world resets and vectorised rewards."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from vla_rl.sims.mujoco.observations import split_fields
from vla_rl.sims.mujoco.randomization import RandomizationSplit
from vla_rl.sims.mujoco.scene import place_free_body

CUBE_HALF_SIZE_M = 0.02
GRASP_MAX_TCP_DISTANCE_M = 0.025
"""A cube counts as held when its centre is this close to the TCP ..."""
GRASP_OPENING_RANGE_M = (0.03, 0.05)
"""... and the fingers are this far apart (closed on a 4 cm cube, not fully closed or open)."""
MAX_CUBE_YAW_RAD = 0.4
"""Cubes start turned about the vertical by up to this angle either way."""


@dataclass
class TaskState:
    """Batched simulator state the task reads to compute rewards (numpy, float64)."""

    tcp_pos: np.ndarray
    """[N, 3] TCP position (m)."""
    gripper_opening_m: np.ndarray
    """[N] distance between the fingers (m)."""
    sensordata: np.ndarray
    """[N, nsensordata] sensor values of each world."""
    goals: np.ndarray
    """[N, goal_dim] per-episode goal values written by ``reset_world``."""


def is_grasped(tcp_pos: np.ndarray, cube_pos: np.ndarray, opening_m: np.ndarray) -> np.ndarray:
    """Bool [N]: cube between the closed fingers."""
    near = np.linalg.norm(tcp_pos - cube_pos, axis=-1) < GRASP_MAX_TCP_DISTANCE_M
    low, high = GRASP_OPENING_RANGE_M
    return near & (opening_m > low) & (opening_m < high)


def place_cube(
    model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator, name: str, xy: np.ndarray
) -> None:
    """Rest cube ``name`` (made by ``add_cube``) on the table at ``xy`` (m), turned by a random yaw."""
    yaw_rad = rng.uniform(-MAX_CUBE_YAW_RAD, MAX_CUBE_YAW_RAD)
    place_free_body(model, data, f"{name}_joint", np.append(xy, CUBE_HALF_SIZE_M), yaw_rad)


def closeness(distance_m: np.ndarray, scale_per_m: float = 10.0) -> np.ndarray:
    """Dense shaping term in (0, 1]: 1 at distance 0, ~0.24 at 3/scale."""
    return 1.0 - np.tanh(scale_per_m * distance_m)


class Task(ABC):
    """One manipulation task. Subclasses declare their goal and privileged-state layouts."""

    name: str
    default_max_episode_steps: int
    goal_dim: int
    privileged_fields: tuple[tuple[str, int], ...]
    """Layout of ``obs["privileged"]`` (see ``split_privileged``)."""
    default_policy_hidden_sizes: tuple[int, ...] | None = None
    """MLP head widths of a state-based policy when the config leaves ``policy.hidden_sizes`` null;
    None: the policies' generic widths."""
    object_fields: tuple[str, ...] = ()
    """The privileged fields that say where the scene's objects are, and nothing about which of
    them the goal names: what an object detector would report. Exposed as ``obs["objects"]``, the
    state a language-conditioned policy may read without the task being solved for it."""

    def __init__(self) -> None:
        self._sensor_slices: dict[str, slice] = {}

    @property
    def privileged_dim(self) -> int:
        return sum(size for _, size in self.privileged_fields)

    def split_privileged(self, privileged: np.ndarray) -> dict[str, np.ndarray]:
        return split_fields(privileged, self.privileged_fields)

    @property
    def object_dim(self) -> int:
        sizes = dict(self.privileged_fields)
        return sum(sizes[name] for name in self.object_fields)

    def object_state(self, privileged: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
        """``[..., object_dim]``: the ``object_fields`` of ``privileged`` ([..., K]), concatenated."""
        views = split_fields(privileged, self.privileged_fields)
        parts = [views[name] for name in self.object_fields]
        if isinstance(privileged, torch.Tensor):
            return torch.cat(parts, dim=-1)
        return np.concatenate(parts, axis=-1)

    @abstractmethod
    def build_scene(self, spec: mujoco.MjSpec) -> None:
        """Add the task's objects, markers and sensors to the scene."""

    def bind(self, model: mujoco.MjModel) -> None:
        """Resolve sensor addresses in the compiled model."""
        for i in range(model.nsensor):
            sensor = model.sensor(i)
            self._sensor_slices[sensor.name] = slice(sensor.adr[0], sensor.adr[0] + sensor.dim[0])

    def sensor(self, state: TaskState, name: str) -> np.ndarray:
        return state.sensordata[:, self._sensor_slices[name]]

    @abstractmethod
    def reset_world(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        rng: np.random.Generator,
        split: RandomizationSplit,
        goal: np.ndarray,
    ) -> None:
        """Sample one world's object poses, colours and goal (written into ``goal`` [goal_dim])."""

    @abstractmethod
    def instruction(self, goal: np.ndarray, split: RandomizationSplit) -> str:
        """Language instruction of one world's episode."""

    @abstractmethod
    def privileged(self, state: TaskState) -> np.ndarray:
        """[N, privileged_dim] task state."""

    @abstractmethod
    def reward_and_success(self, state: TaskState) -> tuple[np.ndarray, np.ndarray]:
        """Dense reward [N] in about [0, 1] and success flags [N] for all worlds at once."""
