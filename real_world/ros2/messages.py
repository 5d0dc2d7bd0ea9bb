"""Building and reading the few ROS 2 messages the robot uses (as rosbags message objects).

The image codec (imageio's Pillow plugin) and the TCP pose as a quaternion are the ROS-free helpers
of ``vla_rl.real_world.ros1.messages``, shared so both transports decode and compute alike.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from vla_rl.real_world.ros1.messages import compressed_format, decode_image, encode_image
from vla_rl.real_world.ros2.types import message

JOINT_STATE = "sensor_msgs/msg/JointState"
IMAGE = "sensor_msgs/msg/Image"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"

# encoding -> (channels, channel order to take RGB from)
_ENCODINGS: dict[str, tuple[int, tuple[int, int, int]]] = {
    "rgb8": (3, (0, 1, 2)),
    "bgr8": (3, (2, 1, 0)),
    "rgba8": (4, (0, 1, 2)),
    "bgra8": (4, (2, 1, 0)),
    "mono8": (1, (0, 0, 0)),
}


def time_msg(stamp_s: float, msgtype: str = "builtin_interfaces/msg/Time") -> Any:
    """builtin_interfaces Time (or Duration) of a time in seconds."""
    sec = math.floor(stamp_s)
    nanosec = min(round((stamp_s - sec) * 1e9), 999_999_999)
    return message(msgtype, sec=sec, nanosec=nanosec)


def stamp_seconds(stamp: Any) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def header(stamp_s: float, frame_id: str = "") -> Any:
    return message("std_msgs/msg/Header", stamp=time_msg(stamp_s), frame_id=frame_id)


def joint_state_message(
    stamp_s: float, names: Sequence[str], position: np.ndarray, velocity: np.ndarray | None = None
) -> Any:
    return message(
        JOINT_STATE,
        header=header(stamp_s),
        name=list(names),
        position=np.asarray(position, dtype=np.float64),
        velocity=np.asarray([] if velocity is None else velocity, dtype=np.float64),
        effort=np.zeros(0, dtype=np.float64),
    )


def image_message(stamp_s: float, rgb: np.ndarray, frame_id: str = "") -> Any:
    """sensor_msgs/Image, encoding rgb8, from uint8 [H, W, 3]."""
    height, width, _ = rgb.shape
    return message(
        IMAGE,
        header=header(stamp_s, frame_id),
        height=height,
        width=width,
        encoding="rgb8",
        is_bigendian=0,
        step=3 * width,
        data=np.ascontiguousarray(rgb, dtype=np.uint8).reshape(-1),
    )


def parse_image(msg: Any) -> np.ndarray:
    """uint8 [H, W, 3] RGB of an 8-bit image (rgb8, bgr8, rgba8, bgra8 or mono8; rows may be padded)."""
    if msg.encoding not in _ENCODINGS:
        raise ValueError(f"unsupported image encoding {msg.encoding!r}; expected one of {sorted(_ENCODINGS)}")
    channels, order = _ENCODINGS[msg.encoding]
    rows = np.asarray(msg.data, dtype=np.uint8).reshape(msg.height, msg.step)
    pixels = rows[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
    return np.ascontiguousarray(pixels[..., list(order)])


def compressed_image_message(
    stamp_s: float, rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90, frame_id: str = ""
) -> Any:
    """sensor_msgs/CompressedImage (jpeg or png) of uint8 [H, W, 3] RGB."""
    data = np.frombuffer(encode_image(rgb, fmt, quality), dtype=np.uint8).copy()
    return message(
        COMPRESSED_IMAGE, header=header(stamp_s, frame_id), format=compressed_format(fmt), data=data
    )


def parse_compressed_image(msg: Any) -> np.ndarray:
    """uint8 [H, W, 3] RGB of a jpeg or png sensor_msgs/CompressedImage; ValueError when it does not
    decode."""
    return decode_image(np.asarray(msg.data, dtype=np.uint8), msg.format)


def pose_stamped_message(stamp_s: float, position: np.ndarray, quat_xyzw: np.ndarray, frame_id: str) -> Any:
    """geometry_msgs/PoseStamped of a position (m) and an (x, y, z, w) quaternion in ``frame_id``."""
    x, y, z = (float(v) for v in position)
    qx, qy, qz, qw = (float(v) for v in quat_xyzw)
    pose = message(
        "geometry_msgs/msg/Pose",
        position=message("geometry_msgs/msg/Point", x=x, y=y, z=z),
        orientation=message("geometry_msgs/msg/Quaternion", x=qx, y=qy, z=qz, w=qw),
    )
    return message(POSE_STAMPED, header=header(stamp_s, frame_id), pose=pose)


def float64_array_message(values: Sequence[float] | np.ndarray, label: str = "") -> Any:
    """std_msgs/Float64MultiArray of a vector (one layout dimension, ``label``)."""
    data = np.asarray(values, dtype=np.float64).reshape(-1)
    dim = message("std_msgs/msg/MultiArrayDimension", label=label, size=data.size, stride=data.size)
    layout = message("std_msgs/msg/MultiArrayLayout", dim=[dim], data_offset=0)
    return message(FLOAT64_MULTI_ARRAY, layout=layout, data=data)


def trajectory_message(
    joint_names: Sequence[str],
    positions: np.ndarray,
    dt_s: float,
    stamp_s: float = 0.0,
    first_point_s: float | None = None,
) -> Any:
    """trajectory_msgs/JointTrajectory: row ``i`` of ``positions`` [T, J] at ``first_point_s + i * dt_s``.

    A zero ``stamp_s`` tells ROS 2's joint_trajectory_controller to start on arrival.
    ``first_point_s`` defaults to ``dt_s``.
    """
    positions = np.atleast_2d(np.asarray(positions, dtype=np.float64))
    first = dt_s if first_point_s is None else first_point_s
    empty = np.zeros(0, dtype=np.float64)
    points = [
        message(
            "trajectory_msgs/msg/JointTrajectoryPoint",
            positions=row.copy(),
            velocities=empty,
            accelerations=empty,
            effort=empty,
            time_from_start=time_msg(first + i * dt_s, "builtin_interfaces/msg/Duration"),
        )
        for i, row in enumerate(positions)
    ]
    return message(JOINT_TRAJECTORY, header=header(stamp_s), joint_names=list(joint_names), points=points)


def parse_trajectory(msg: Any) -> np.ndarray:
    """Positions [T, J] of a JointTrajectory (in its own joint order)."""
    if not msg.points:
        return np.zeros((0, len(msg.joint_names)))
    return np.stack([np.asarray(p.positions, dtype=np.float64) for p in msg.points])
