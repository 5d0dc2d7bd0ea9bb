"""The robot interface that deployment code talks to, whatever carries the messages.

A robot declares its observation and action features up front (readable while disconnected, so
a deployment can be checked against the policy before any hardware moves), then ``connect``,
``get_observation``, ``send_action`` and ``disconnect``. It is a context manager, so leaving a
``with`` block disconnects even on an exception.

Commands are absolute joint-position targets (rad) and a gripper opening (m): what a Franka's
joint position controller and most ROS arm drivers take. Turning a policy's normalised action into
such a target is the deployment loop's job (with the same controllers the simulator uses), and
checking it is the safety layer's; ``send_action`` returns the command actually sent.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Feature:
    """Shape, dtype and (for vectors) the names of the entries of one observation or action."""

    shape: tuple[int, ...]
    dtype: str
    names: tuple[str, ...] | None = None


@dataclass
class JointCommand:
    """One command to the arm: absolute joint targets and the gripper opening."""

    arm_qpos_rad: np.ndarray
    """[7] joint position targets (rad)."""
    gripper_opening_m: float
    """Distance between the fingers to move to (m)."""
    stamp_s: float = 0.0
    """When the command was made (seconds, the sender's clock)."""

    def copy(self) -> JointCommand:
        return JointCommand(self.arm_qpos_rad.copy(), float(self.gripper_opening_m), self.stamp_s)


class InterventionInput(ABC):
    """A human override source polled once per control step (teleoperation, spacemouse, ...)."""

    watching: bool | None = None
    """Whether this input may take over in the current episode, where it decides that itself (the
    scripted expert's ``watch_probability``); None: not known (a person)."""

    @abstractmethod
    def poll(self) -> JointCommand | None:
        """The command that replaces the policy's this step, or None when nobody intervenes."""

    def reset(self) -> None:  # noqa: B027 - optional hook
        """A new episode starts (the deployment loop calls this before its first step)."""

    def observe(self, observation: RobotObservation, proposed: JointCommand | None) -> None:  # noqa: B027
        """Called before each ``poll`` with the step's observation and the command the policy
        proposed in the step before (before the safety layer; None when the policy drove nothing):
        for inputs that decide from what the robot does (``ExpertIntervention``). Optional hook."""


@dataclass
class RobotObservation:
    """What a robot reports: joint state, camera images and optional task state, with their stamps."""

    arm_qpos_rad: np.ndarray
    """[7] measured joint angles (rad)."""
    arm_qvel_rad_s: np.ndarray
    """[7] measured joint velocities (rad/s)."""
    gripper_opening_m: float
    """Measured distance between the fingers (m)."""
    joint_state_stamp_s: float
    """When the joint state was measured (seconds, the robot's clock)."""
    images: dict[str, np.ndarray] = field(default_factory=dict)
    """Camera name -> uint8 [H, W, 3]."""
    image_stamps_s: dict[str, float] = field(default_factory=dict)
    """Camera name -> when the image was taken."""
    task_state: np.ndarray | None = None
    """Object and goal state from a tracker (what the simulator calls ``privileged``), if any."""
    extras: dict[str, Any] = field(default_factory=dict)
    """Transport-specific extras (e.g. the simulated robot's episode id and success flag)."""


class RobotError(RuntimeError):
    """A robot could not do what was asked (not connected, no data within the timeout, ...)."""


class Robot(ABC):
    """A robot arm with a gripper, seen through some transport (ROS 1, ROS 2, direct)."""

    @property
    @abstractmethod
    def observation_features(self) -> dict[str, Feature]:
        """Name -> feature of everything ``get_observation`` fills; valid while disconnected."""

    @property
    @abstractmethod
    def action_features(self) -> dict[str, Feature]:
        """Name -> feature of what ``send_action`` takes; valid while disconnected."""

    @property
    @abstractmethod
    def is_connected(self) -> bool: ...

    @abstractmethod
    def connect(self) -> None:
        """Open the transport and wait until the first joint state arrives (or raise RobotError)."""

    @abstractmethod
    def get_observation(self) -> RobotObservation:
        """The latest joint state, images and task state (no waiting beyond the first one)."""

    def now_s(self) -> float:
        """The clock of this robot's stamps (wall time unless a robot keeps its own, e.g. simulated)."""
        return time.time()

    def wait_for_new_observation(self, after_stamp_s: float, timeout_s: float) -> bool:
        """Block until a joint state stamped after ``after_stamp_s`` is there; False on timeout.
        The deployment loop paces itself by this. Transports override it with a real wait; this
        default polls ``get_observation``."""
        deadline = time.monotonic() + timeout_s
        while self.get_observation().joint_state_stamp_s <= after_stamp_s:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)
        return True

    @abstractmethod
    def send_action(self, command: JointCommand) -> JointCommand:
        """Send ``command`` (already checked by the safety layer) and return what was sent."""

    def teleop_input(self) -> InterventionInput | None:
        """The robot's teleoperation override as an intervention input, if it has one."""
        return None

    @abstractmethod
    def disconnect(self) -> None:
        """Close the transport; safe to call twice."""

    def __enter__(self) -> Robot:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.disconnect()


def arm_features(num_joints: int = 7) -> dict[str, Feature]:
    """Observation features every arm reports: joint positions, velocities, gripper opening."""
    joints = tuple(f"joint{i}" for i in range(1, num_joints + 1))
    return {
        "arm_qpos_rad": Feature((num_joints,), "float64", joints),
        "arm_qvel_rad_s": Feature((num_joints,), "float64", joints),
        "gripper_opening_m": Feature((1,), "float64", ("gripper",)),
    }


def robot_features(
    cameras: Iterable[str], image_size: tuple[int, int], task_state_dim: int = 0, num_joints: int = 7
) -> dict[str, Feature]:
    """Observation features of an arm with these cameras (``rgb_<camera>``, uint8 [H, W, 3]) and,
    when ``task_state_dim`` > 0, a task-state vector."""
    features = arm_features(num_joints)
    height, width = image_size
    for camera in cameras:
        features[f"rgb_{camera}"] = Feature((height, width, 3), "uint8")
    if task_state_dim:
        features["task_state"] = Feature((task_state_dim,), "float64")
    return features


def command_features(num_joints: int = 7) -> dict[str, Feature]:
    """Action features of ``JointCommand``: the arm's observation features without the velocities."""
    features = arm_features(num_joints)
    del features["arm_qvel_rad_s"]
    return features
