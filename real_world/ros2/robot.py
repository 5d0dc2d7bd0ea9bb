"""``Ros2Robot``: the robot interface over ROS 2 topics, through cyclonedds (no ROS 2 needed) or rclpy.

Subscribed (best-effort by default, which matches reliable and best-effort publishers alike):

* ``joint_states`` (sensor_msgs/JointState): arm joints by name, and the finger joints, whose
  positions add up to the gripper opening (Franka-style: each finger moves half the opening).
  Messages without the arm joints (e.g. a separate gripper driver on the same topic) only update
  the fingers. Missing velocities read as zero.
* one sensor_msgs/Image per camera (rgb8, bgr8, rgba8, bgra8 or mono8; returned as RGB), or with
  ``image_transport='compressed'`` one jpeg/png sensor_msgs/CompressedImage per camera on the image
  topic + ``/compressed`` (image_transport's name for it). Images that do not decode are dropped
  and counted in ``dropped['images']``.
* optionally a task-state topic (std_msgs/Float64MultiArray), stamped on arrival.

Published (reliable):

* the arm command, either trajectory_msgs/JointTrajectory (for joint_trajectory_controller: one
  point ``point_time_from_start_s`` ahead, or a whole chunk with ``send_trajectory``; header stamp
  zero, i.e. "start on arrival", unless ``stamp_trajectories``), std_msgs/Float64MultiArray (for a
  forward_command_controller: ``data`` = the joint targets in ``arm_joint_names`` order), or
  geometry_msgs/PoseStamped (for a Cartesian impedance controller: the TCP pose of the joint target
  by forward kinematics of the training model, in ``pose_frame_id``, stamped with the command's
  ``stamp_s``), as ``command_type`` says.
* the gripper command, std_msgs/Float64MultiArray with ``data = [opening_m * gripper_command_scale]``
  (one value, as a forward_command_controller of one joint takes; scale 0.5 for a controller of a
  single finger). For a chunk it carries the first command's opening.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from vla_rl.real_world import ros_messages as m
from vla_rl.real_world.robot import JointCommand, RobotError, RobotObservation
from vla_rl.real_world.ros2.dds import Node
from vla_rl.real_world.ros2.messages import ROS2
from vla_rl.real_world.ros2.nodes import make_node
from vla_rl.real_world.stamped import StreamedRobot, StreamedRobotConfig, await_subscribers


@dataclass
class Ros2RobotConfig(StreamedRobotConfig):
    """How to reach the robot over ROS 2 and what it reports."""

    arm_joint_names: tuple[str, ...] = tuple(f"joint{i}" for i in range(1, 8))
    gripper_joint_names: tuple[str, ...] = ("finger_joint1", "finger_joint2")
    """Summed to the gripper opening; empty: no gripper feedback (the opening reads NaN)."""
    point_time_from_start_s: float = 0.05
    """``time_from_start`` of a single command's point; chunks space their points by ``dt_s``."""
    stamp_trajectories: bool = False
    """Put the command's ``stamp_s`` in the trajectory header (the controller must share the clock)."""
    gripper_command_scale: float = 1.0
    sensor_qos: str = "sensor_data"
    command_qos: str = "reliable"
    require_command_subscriber: bool = True
    """``connect`` fails unless the arm and gripper command topics have subscribers within the timeout."""
    backend: Literal["dds", "rclpy"] = "dds"
    domain_id: int = 0
    dds_config: str | None = None
    """cyclonedds XML configuration (e.g. ``dds.loopback_config()``); None: ``CYCLONEDDS_URI``."""


class Ros2Robot(StreamedRobot):
    """Subscribes joint states, images and task state; publishes joint targets and the gripper."""

    config: Ros2RobotConfig
    messages = ROS2

    def __init__(self, config: Ros2RobotConfig, node_factory: Callable[[], Node] | None = None) -> None:
        super().__init__(config, len(config.arm_joint_names))
        self._node_factory = node_factory or (
            lambda: make_node(config.backend, config.domain_id, config.dds_config)
        )
        self._node: Node | None = None
        self._fingers: dict[str, float] = {}
        self.dropped["joint_states"] = 0  # without the arm joints (nor a finger)

    @property
    def is_connected(self) -> bool:
        return self._node is not None

    def connect(self) -> None:
        if self._node is not None:
            return
        config, topics = self.config, self.config.topics
        with self._lock:  # nothing from an earlier connection
            self.clear_streams()
            self._fingers.clear()
        self.load_kinematics()
        node = self._node_factory()
        try:
            node.subscription(topics.joint_states, m.JOINT_STATE, self._on_joint_state, config.sensor_qos)
            for camera, topic, msgtype in self.image_subscriptions():
                node.subscription(topic, msgtype, functools.partial(self.on_image, camera), config.sensor_qos)
            if config.task_state_dim:
                node.subscription(
                    topics.task_state, m.FLOAT64_MULTI_ARRAY, self.on_task_state, config.sensor_qos
                )
            command_type = m.COMMAND_MSGTYPES[config.command_type]
            self._command_pub = node.publisher(topics.command, command_type, config.command_qos)
            self._gripper_pub = node.publisher(
                topics.gripper_command, m.FLOAT64_MULTI_ARRAY, config.command_qos
            )
            deadline = time.monotonic() + config.connect_timeout_s
            if not self.wait_for_new_observation(-np.inf, config.connect_timeout_s):
                raise RobotError(
                    f"no joint state with joints {config.arm_joint_names} on {topics.joint_states} within "
                    f"{config.connect_timeout_s} s: is the robot driver running, on ROS_DOMAIN_ID "
                    f"{config.domain_id}, reachable by DDS discovery?"
                )
            if config.require_command_subscriber:
                subscribers = {
                    topics.command: self._command_pub.subscription_count,
                    topics.gripper_command: self._gripper_pub.subscription_count,
                }
                await_subscribers(subscribers, deadline, config.connect_timeout_s)
        except BaseException:
            node.close()
            raise
        self._node = node

    def disconnect(self) -> None:
        node, self._node = self._node, None
        if node is not None:
            node.close()

    # -------------------------------------------------------------------------- callbacks
    def _on_joint_state(self, msg: Any) -> None:
        position = dict(zip(msg.name, np.asarray(msg.position, dtype=np.float64), strict=False))
        velocity = dict(zip(msg.name, np.asarray(msg.velocity, dtype=np.float64), strict=False))
        with self._lock:
            for finger in self.config.gripper_joint_names:
                if finger in position:
                    self._fingers[finger] = float(position[finger])
            arm = self.config.arm_joint_names
            if not all(name in position for name in arm):
                if not any(finger in position for finger in self.config.gripper_joint_names):
                    self.dropped["joint_states"] += 1
                return
            qpos = np.array([position[name] for name in arm])
            qvel = np.array([velocity.get(name, 0.0) for name in arm])
            self.add_joint_state(self.messages.seconds(msg.header.stamp), (qpos, qvel))

    # -------------------------------------------------------------------------- observation
    def get_observation(self) -> RobotObservation:
        if self._node is None:
            raise RobotError("get_observation on a disconnected robot")
        return self.observation(self._joint_values)

    def _joint_values(self, joint: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, float]:
        """Arm angles and velocities of a stored joint state, and the latest fingers' opening."""
        fingers = [self._fingers.get(name) for name in self.config.gripper_joint_names]
        opening = float(sum(fingers)) if fingers and None not in fingers else float("nan")
        qpos, qvel = joint
        return qpos.copy(), qvel.copy(), opening

    # -------------------------------------------------------------------------- commands
    def send_action(self, command: JointCommand) -> JointCommand:
        self._publish_arm(
            np.asarray(command.arm_qpos_rad)[None], self.config.point_time_from_start_s, command
        )
        self._publish_gripper(command.gripper_opening_m)
        return command.copy()

    def send_trajectory(self, commands: Sequence[JointCommand], dt_s: float) -> list[JointCommand]:
        """Publish a chunk as one JointTrajectory, points ``dt_s`` apart (the first ``dt_s`` ahead).

        Needs ``command_type='joint_trajectory'``. The gripper gets the first command's opening.
        """
        if not commands:
            raise ValueError("send_trajectory needs at least one command")
        if self.config.command_type != "joint_trajectory":
            raise RobotError("send_trajectory needs command_type='joint_trajectory'")
        positions = np.stack([np.asarray(c.arm_qpos_rad, dtype=np.float64) for c in commands])
        self._publish_arm(positions, dt_s, commands[0], spacing_s=dt_s)
        self._publish_gripper(commands[0].gripper_opening_m)
        return [c.copy() for c in commands]

    def _publish_arm(
        self, positions: np.ndarray, first_s: float, command: JointCommand, spacing_s: float = 0.0
    ) -> None:
        if self._node is None:
            raise RobotError("send_action on a disconnected robot")
        joints = self.config.arm_joint_names
        if positions.shape[1] != len(joints):
            raise ValueError(f"expected {len(joints)} joint targets, got {positions.shape[1]}")
        if self.config.command_type == "float64_multi_array":
            msg = self.messages.float64_array_message(positions[0], label="joints")
        elif self.config.command_type == "pose_stamped":
            msg = self.pose_command(positions[0], command.stamp_s)
        else:
            stamp_s = command.stamp_s if self.config.stamp_trajectories else 0.0
            msg = self.messages.trajectory_message(
                joints, positions, spacing_s, stamp_s, first_point_s=first_s
            )
        self._command_pub.publish(msg)

    def _publish_gripper(self, opening_m: float) -> None:
        scaled = float(opening_m) * self.config.gripper_command_scale
        self._gripper_pub.publish(self.messages.float64_array_message([scaled], label="gripper"))
