"""The task interface: scene contents, per-world resets and vectorised rewards."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
from vla_rl.robots.torch_rotations import euclidean_norm
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
    """Batched simulator state the task reads to compute rewards.

    Either all numpy float64 arrays (read by ``privileged`` / ``reward_and_success``) or all torch
    tensors of one float dtype on the env's device (read by the ``*_torch`` twins, which keep them
    there)."""

    tcp_pos: np.ndarray | torch.Tensor
    """[N, 3] TCP position (m)."""
    gripper_opening_m: np.ndarray | torch.Tensor
    """[N] distance between the fingers (m)."""
    sensordata: np.ndarray | torch.Tensor
    """[N, nsensordata] sensor values of each world."""
    goals: np.ndarray | torch.Tensor
    """[N, goal_dim] per-episode goal values written by ``reset_world``."""


def is_grasped(tcp_pos: np.ndarray, cube_pos: np.ndarray, opening_m: np.ndarray) -> np.ndarray:
    """Bool [N]: cube between the closed fingers."""
    near = np.linalg.norm(tcp_pos - cube_pos, axis=-1) < GRASP_MAX_TCP_DISTANCE_M
    low, high = GRASP_OPENING_RANGE_M
    return near & (opening_m > low) & (opening_m < high)


def is_grasped_torch(tcp_pos: torch.Tensor, cube_pos: torch.Tensor, opening_m: torch.Tensor) -> torch.Tensor:
    """Bool tensor [N]: cube between the closed fingers (the twin of ``is_grasped``)."""
    near = euclidean_norm(tcp_pos - cube_pos) < GRASP_MAX_TCP_DISTANCE_M
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


def closeness_torch(distance_m: torch.Tensor, scale_per_m: float = 10.0) -> torch.Tensor:
    """Dense shaping term in (0, 1] as a tensor of ``distance_m``'s dtype (the twin of ``closeness``)."""
    return 1.0 - torch.tanh(scale_per_m * distance_m)


def as_float(flags: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Bool tensor ``flags`` as 0/1 in ``like``'s dtype (bool times a Python float would give the
    default dtype, float32, and round a float64 reward)."""
    return flags.to(like.dtype)


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

    def sensor(self, state: TaskState, name: str) -> np.ndarray | torch.Tensor:
        """[N, dim] values of sensor ``name`` (an array or a tensor, as ``state.sensordata`` is)."""
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

    def privileged_torch(self, state: TaskState) -> torch.Tensor:
        """[N, privileged_dim] task state from a ``TaskState`` of tensors, on their device and in their
        dtype: the twin of ``privileged``."""
        raise NotImplementedError(f"task {self.name!r} has no torch privileged state (privileged_torch)")

    def reward_and_success_torch(self, state: TaskState) -> tuple[torch.Tensor, torch.Tensor]:
        """Dense reward [N] (the state's dtype) and bool success flags [N] from a ``TaskState`` of
        tensors, on their device: the twin of ``reward_and_success``."""
        raise NotImplementedError(f"task {self.name!r} has no torch reward (reward_and_success_torch)")
