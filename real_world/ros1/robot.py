"""``Ros1Robot``: the robot interface over rospy topics (see ``vla_rl.real_world.topics``).

Cameras arrive as sensor_msgs/Image (``image_transport='raw'``, the default) or as jpeg/png
sensor_msgs/CompressedImage on the image topic + ``/compressed`` (``'compressed'``). The arm command
is a trajectory_msgs/JointTrajectory (default), a std_msgs/Float64MultiArray of the 7 joint targets,
or a geometry_msgs/PoseStamped of the target's TCP pose (``command_type``); the gripper topic is
std_msgs/Float64 whatever the arm takes.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from vla_rl.real_world import ros_messages as m
from vla_rl.real_world.recording import InterventionInput
from vla_rl.real_world.robot import JointCommand, RobotError, RobotObservation
from vla_rl.real_world.ros1.messages import Ros1Messages
from vla_rl.real_world.stamped import StreamedRobot, StreamedRobotConfig, await_subscribers


@dataclass
class Ros1RobotConfig(StreamedRobotConfig):
    """How to reach the robot over ROS 1 and what it reports."""

    control_hz: float = 20.0
    """Commands are one control period apart (``time_from_start`` of trajectory points)."""
    node_name: str = "vla_rl_deploy"


class Ros1Robot(StreamedRobot):
    """Subscribes joint states, images and task state; publishes joint targets and the gripper."""

    config: Ros1RobotConfig

    def __init__(self, config: Ros1RobotConfig) -> None:
        super().__init__(config)
        self._estop = False
        self._teleop_override = False
        self._teleop_command: np.ndarray | None = None
        self._handles: list[Any] = []
        self._connected = False

    @property
    def is_connected(self) -> bool:
        return self._connected

    # -------------------------------------------------------------------------- connection
    def connect(self) -> None:
        if self._connected:
            return
        self.messages = messages = Ros1Messages()
        rospy = messages.rospy
        self.load_kinematics()
        if not rospy.core.is_initialized():
            rospy.init_node(self.config.node_name, anonymous=True, disable_signals=True)
        topics = self.config.topics

        def subscribe(topic: str, msgtype: str, callback: Any, queue_size: int = 4, **options: Any) -> Any:
            return rospy.Subscriber(topic, messages.type(msgtype), callback, queue_size=queue_size, **options)

        bool_type = "std_msgs/msg/Bool"
        self._handles = [
            subscribe(topics.joint_states, m.JOINT_STATE, self._on_joint_state, tcp_nodelay=True),
            subscribe(topics.estop, bool_type, self._on_estop),
            subscribe(topics.teleop_override, bool_type, self._on_teleop_override),
            subscribe(topics.teleop_command, m.JOINT_TRAJECTORY, self._on_teleop_command),
        ]
        for camera, topic, msgtype in self.image_subscriptions():
            on_image = functools.partial(self.on_image, camera)
            self._handles.append(subscribe(topic, msgtype, on_image, queue_size=2, tcp_nodelay=True))
        if self.config.task_state_dim:
            self._handles.append(
                subscribe(topics.task_state, m.FLOAT64_MULTI_ARRAY, self.on_task_state, tcp_nodelay=True)
            )
        command_type = messages.type(m.COMMAND_MSGTYPES[self.config.command_type])
        self._command_pub = rospy.Publisher(topics.command, command_type, queue_size=2, tcp_nodelay=True)
        float64 = messages.type("std_msgs/msg/Float64")
        self._gripper_pub = rospy.Publisher(topics.gripper_command, float64, queue_size=2, tcp_nodelay=True)
        self._handles += [self._command_pub, self._gripper_pub]
        if not self.wait_for_new_observation(-np.inf, self.config.connect_timeout_s):
            self.disconnect()
            raise RobotError(
                f"no joint state on {topics.joint_states} within {self.config.connect_timeout_s} s: "
                "is the robot (or the simulated robot node) running and ROS_MASTER_URI right?"
            )
        timeout_s = self.config.connect_timeout_s
        subscribers = {topics.command: self._command_pub.get_num_connections}
        await_subscribers(subscribers, time.monotonic() + timeout_s, timeout_s)
        self._connected = True

    def disconnect(self) -> None:
        for handle in self._handles:
            handle.unregister()
        self._handles = []
        self._connected = False

    # -------------------------------------------------------------------------- callbacks
    def _on_joint_state(self, msg: Any) -> None:
        self.add_joint_state(msg.header.stamp.to_sec(), m.parse_joint_state(msg))

    def _on_estop(self, msg: Any) -> None:
        self._estop = self._estop or bool(msg.data)

    def _on_teleop_override(self, msg: Any) -> None:
        self._teleop_override = bool(msg.data)

    def _on_teleop_command(self, msg: Any) -> None:
        points = m.parse_trajectory(msg)
        if len(points):
            self._teleop_command = points[0]

    # -------------------------------------------------------------------------- observation
    def get_observation(self) -> RobotObservation:
        return self.observation(lambda joint: joint, estop=self._estop)

    def teleop_command(self) -> np.ndarray | None:
        """Arm targets [7] a person is sending while the override is on, else None."""
        return self._teleop_command if self._teleop_override else None

    def teleop_input(self) -> InterventionInput:
        """The teleoperation override topics as the deployment loop's intervention input."""
        return _TopicIntervention(self)

    # -------------------------------------------------------------------------- commands
    def send_action(self, command: JointCommand) -> JointCommand:
        return self.send_trajectory([command], command.stamp_s)

    def send_trajectory(self, commands: list[JointCommand], stamp_s: float) -> JointCommand:
        """Publish a whole chunk of targets, one control period apart; returns the first. The gripper
        topic gets the first command's opening. A chunk of more than one command needs
        ``command_type='joint_trajectory'``."""
        if not self._connected:
            raise RobotError("send_action on a disconnected robot")
        self._command_pub.publish(self._command_message(commands, stamp_s))
        self._gripper_pub.publish(
            self.messages.make("std_msgs/msg/Float64", data=float(commands[0].gripper_opening_m))
        )
        return commands[0]

    def _command_message(self, commands: list[JointCommand], stamp_s: float) -> Any:
        """The arm command of ``config.command_type``; ``stamp_s`` is the header stamp (the
        observation the commands were computed from)."""
        kind = self.config.command_type
        positions = np.stack([np.asarray(c.arm_qpos_rad, dtype=np.float64) for c in commands])
        if kind == "joint_trajectory":
            period_s = 1.0 / self.config.control_hz
            return self.messages.trajectory_message(m.ARM_JOINT_NAMES, positions, period_s, stamp_s)
        if len(commands) != 1:
            raise RobotError(f"a chunk of {len(commands)} commands needs command_type='joint_trajectory'")
        if kind == "float64_multi_array":
            return self.messages.float64_array_message(positions[0], label="joints")
        return self.pose_command(positions[0], stamp_s)


class _TopicIntervention(InterventionInput):
    """A person's joint targets from ``topics.teleop_command`` while ``topics.teleop_override`` is
    True; the gripper keeps its measured opening."""

    def __init__(self, robot: Ros1Robot) -> None:
        self.robot = robot

    def poll(self) -> JointCommand | None:
        arm = self.robot.teleop_command()
        if arm is None:
            return None
        return JointCommand(arm.copy(), self.robot.get_observation().gripper_opening_m)
