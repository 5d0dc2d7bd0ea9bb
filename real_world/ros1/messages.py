"""Conversions between ROS 1 messages and the robot interface's numpy types."""

from __future__ import annotations

from typing import Any

import numpy as np
from vla_rl.real_world.robot import JointCommand

ARM_JOINT_NAMES = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINT_NAMES = ("finger_joint1", "finger_joint2")


def stamp_seconds(header: Any) -> float:
    return header.stamp.to_sec()


def joint_state_message(
    msg_type: type, rospy: Any, stamp_s: float, arm_qpos: np.ndarray, arm_qvel: np.ndarray, opening_m: float
) -> Any:
    """sensor_msgs/JointState of the arm and both fingers (each finger at half the opening)."""
    msg = msg_type()
    msg.header.stamp = rospy.Time.from_sec(stamp_s)
    msg.name = list(ARM_JOINT_NAMES + FINGER_JOINT_NAMES)
    msg.position = [*map(float, arm_qpos), opening_m / 2, opening_m / 2]
    msg.velocity = [*map(float, arm_qvel), 0.0, 0.0]
    return msg


def parse_joint_state(msg: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """(arm_qpos [7], arm_qvel [7], finger distance) from a JointState, by joint name."""
    index = {name: i for i, name in enumerate(msg.name)}
    missing = [n for n in ARM_JOINT_NAMES if n not in index]
    if missing:
        raise ValueError(f"JointState lacks joints {missing}")
    qpos = np.array([msg.position[index[n]] for n in ARM_JOINT_NAMES])
    qvel = np.array([msg.velocity[index[n]] for n in ARM_JOINT_NAMES]) if msg.velocity else np.zeros(7)
    opening = sum(msg.position[index[n]] for n in FINGER_JOINT_NAMES if n in index)
    return qpos, qvel, float(opening)


def image_message(msg_type: type, rospy: Any, stamp_s: float, rgb: np.ndarray) -> Any:
    """sensor_msgs/Image, encoding rgb8, from uint8 [H, W, 3]."""
    msg = msg_type()
    msg.header.stamp = rospy.Time.from_sec(stamp_s)
    msg.height, msg.width = int(rgb.shape[0]), int(rgb.shape[1])
    msg.encoding = "rgb8"
    msg.step = 3 * msg.width
    msg.data = np.ascontiguousarray(rgb, dtype=np.uint8).tobytes()
    return msg


def parse_image(msg: Any) -> np.ndarray:
    """uint8 [H, W, 3] from an rgb8 or bgr8 sensor_msgs/Image."""
    if msg.encoding not in ("rgb8", "bgr8"):
        raise ValueError(f"unsupported image encoding {msg.encoding!r}; expected rgb8 or bgr8")
    rows = np.frombuffer(msg.data, np.uint8).reshape(msg.height, msg.step)
    rgb = rows[:, : 3 * msg.width].reshape(msg.height, msg.width, 3)
    return rgb[..., ::-1].copy() if msg.encoding == "bgr8" else rgb.copy()


def trajectory_message(
    trajectory_type: type,
    point_type: type,
    rospy: Any,
    commands: list[JointCommand],
    period_s: float,
    stamp_s: float,
) -> Any:
    """trajectory_msgs/JointTrajectory with one point per command, ``period_s`` apart. The header
    stamp is the observation the commands were computed from, so the robot can tell their age."""
    msg = trajectory_type()
    msg.header.stamp = rospy.Time.from_sec(stamp_s)
    msg.joint_names = list(ARM_JOINT_NAMES)
    for k, command in enumerate(commands):
        point = point_type()
        point.positions = [float(q) for q in command.arm_qpos_rad]
        point.time_from_start = rospy.Duration.from_sec((k + 1) * period_s)
        msg.points.append(point)
    return msg


def parse_trajectory(msg: Any) -> list[np.ndarray]:
    """Arm targets [7] of each point, reordered by joint name."""
    index = {name: i for i, name in enumerate(msg.joint_names)}
    missing = [n for n in ARM_JOINT_NAMES if n not in index]
    if missing:
        raise ValueError(f"JointTrajectory lacks joints {missing}")
    order = [index[n] for n in ARM_JOINT_NAMES]
    return [np.asarray(point.positions, dtype=np.float64)[order] for point in msg.points]
