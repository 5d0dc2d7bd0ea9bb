"""Building and reading the ROS messages of the robot side and the simulated robot, ROS 1 and 2 alike.

Both ROS versions lay these messages out the same way (sensor_msgs/JointState, Image and
CompressedImage, trajectory_msgs/JointTrajectory, std_msgs/Float64MultiArray,
geometry_msgs/PoseStamped); they differ in how a message object is made and how a time is written.
``RosMessages`` builds every message from those two things, which ``ros1.messages.Ros1Messages``
(rospy's genpy classes) and ``ros2.messages.Ros2Messages`` (rosbags' dataclasses) supply. Reading
takes a message of either version. The image codec (imageio's Pillow plugin) and the TCP pose as a
quaternion are here too. This module imports no ROS.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import imageio.v3 as iio
import mujoco
import numpy as np
from vla_rl.real_world.topics import IMAGE_TRANSPORTS, RobotTopics

if TYPE_CHECKING:
    from vla_rl.real_world.kinematics import ArmKinematics

JOINT_STATE = "sensor_msgs/msg/JointState"
IMAGE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
INT64 = "std_msgs/msg/Int64"
COMMAND_MSGTYPES = {
    "joint_trajectory": JOINT_TRAJECTORY,
    "float64_multi_array": FLOAT64_MULTI_ARRAY,
    "pose_stamped": POSE_STAMPED,
}
"""``command_type`` -> the message type of ``topics.command``."""

ARM_JOINT_NAMES = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINT_NAMES = ("finger_joint1", "finger_joint2")
COMPRESSED_SUFFIX = "/compressed"
"""image_transport's convention: a camera's CompressedImage lives on its image topic + this."""
IMAGE_FORMATS = ("jpeg", "png")


def image_channel(topics: RobotTopics, camera: str, image_transport: str) -> tuple[str, str]:
    """(topic, message type) of ``camera``'s frames: sensor_msgs/Image on its image topic (``raw``), or
    sensor_msgs/CompressedImage on that topic + ``/compressed`` (``compressed``)."""
    if image_transport == "compressed":
        return topics.image_topic(camera) + COMPRESSED_SUFFIX, COMPRESSED_IMAGE
    if image_transport == "raw":
        return topics.image_topic(camera), IMAGE
    raise ValueError(f"image transport {image_transport!r}: expected one of {IMAGE_TRANSPORTS}")


# encoding -> (channels, channel order to take RGB from)
_ENCODINGS: dict[str, tuple[int, tuple[int, int, int]]] = {
    "rgb8": (3, (0, 1, 2)),
    "bgr8": (3, (2, 1, 0)),
    "rgba8": (4, (0, 1, 2)),
    "bgra8": (4, (2, 1, 0)),
    "mono8": (1, (0, 0, 0)),
}


class RosMessages(ABC):
    """The messages of one ROS version; subclasses say how a message and a time are made."""

    @abstractmethod
    def make(self, msgtype: str, **fields: Any) -> Any:
        """A message of ``msgtype`` (ROS 2's name, ``sensor_msgs/msg/Image``) with these fields."""

    @abstractmethod
    def time(self, seconds: float, duration: bool = False) -> Any:
        """A header stamp (with ``duration``: a ``time_from_start``) of a time in seconds."""

    @abstractmethod
    def seconds(self, stamp: Any) -> float:
        """A stamp or duration in float seconds."""

    @abstractmethod
    def byte_data(self, data: np.ndarray) -> Any:
        """The value of a uint8[] field (``Image.data``) holding the flat uint8 array ``data``."""

    def header(self, stamp_s: float, frame_id: str = "") -> Any:
        return self.make("std_msgs/msg/Header", stamp=self.time(stamp_s), frame_id=frame_id)

    def joint_state_message(
        self, stamp_s: float, names: Sequence[str], position: np.ndarray, velocity: np.ndarray | None = None
    ) -> Any:
        return self.make(
            JOINT_STATE,
            header=self.header(stamp_s),
            name=list(names),
            position=np.asarray(position, dtype=np.float64),
            velocity=np.asarray([] if velocity is None else velocity, dtype=np.float64),
            effort=np.zeros(0, dtype=np.float64),
        )

    def image_message(self, stamp_s: float, rgb: np.ndarray, frame_id: str = "") -> Any:
        """sensor_msgs/Image, encoding rgb8, from uint8 [H, W, 3]."""
        height, width, _ = rgb.shape
        return self.make(
            IMAGE,
            header=self.header(stamp_s, frame_id),
            height=height,
            width=width,
            encoding="rgb8",
            is_bigendian=0,
            step=3 * width,
            data=self.byte_data(np.ascontiguousarray(rgb, dtype=np.uint8).reshape(-1)),
        )

    def compressed_image_message(
        self, stamp_s: float, rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90, frame_id: str = ""
    ) -> Any:
        """sensor_msgs/CompressedImage (jpeg or png) of uint8 [H, W, 3] RGB."""
        data = self.byte_data(np.frombuffer(encode_image(rgb, fmt, quality), dtype=np.uint8))
        header = self.header(stamp_s, frame_id)
        return self.make(COMPRESSED_IMAGE, header=header, format=compressed_format(fmt), data=data)

    def pose_stamped_message(
        self, stamp_s: float, position: np.ndarray, quat_xyzw: np.ndarray, frame_id: str
    ) -> Any:
        """geometry_msgs/PoseStamped of a position (m) and an (x, y, z, w) quaternion in ``frame_id``."""
        x, y, z = (float(v) for v in position)
        qx, qy, qz, qw = (float(v) for v in quat_xyzw)
        pose = self.make(
            "geometry_msgs/msg/Pose",
            position=self.make("geometry_msgs/msg/Point", x=x, y=y, z=z),
            orientation=self.make("geometry_msgs/msg/Quaternion", x=qx, y=qy, z=qz, w=qw),
        )
        return self.make(POSE_STAMPED, header=self.header(stamp_s, frame_id), pose=pose)

    def float64_array_message(self, values: Sequence[float] | np.ndarray, label: str = "") -> Any:
        """std_msgs/Float64MultiArray of a vector (one layout dimension, ``label``), as a
        forward_command_controller takes."""
        data = np.asarray(values, dtype=np.float64).reshape(-1)
        dim = self.make("std_msgs/msg/MultiArrayDimension", label=label, size=data.size, stride=data.size)
        layout = self.make("std_msgs/msg/MultiArrayLayout", dim=[dim], data_offset=0)
        return self.make(FLOAT64_MULTI_ARRAY, layout=layout, data=data)

    def trajectory_message(
        self,
        joint_names: Sequence[str],
        positions: np.ndarray,
        dt_s: float,
        stamp_s: float = 0.0,
        first_point_s: float | None = None,
    ) -> Any:
        """trajectory_msgs/JointTrajectory: row ``i`` of ``positions`` [T, J] at ``first_point_s + i * dt_s``.

        The header stamp is the observation the targets were computed from (so the receiver can
        tell their age); a zero ``stamp_s`` tells ROS 2's joint_trajectory_controller to start on
        arrival. ``first_point_s`` defaults to ``dt_s``.
        """
        positions = np.atleast_2d(np.asarray(positions, dtype=np.float64))
        first = dt_s if first_point_s is None else first_point_s
        empty = np.zeros(0, dtype=np.float64)
        points = [
            self.make(
                "trajectory_msgs/msg/JointTrajectoryPoint",
                positions=row.copy(),
                velocities=empty,
                accelerations=empty,
                effort=empty,
                time_from_start=self.time(first + i * dt_s, duration=True),
            )
            for i, row in enumerate(positions)
        ]
        header = self.header(stamp_s)
        return self.make(JOINT_TRAJECTORY, header=header, joint_names=list(joint_names), points=points)


def joint_order(names: Sequence[str], what: str, joint_names: Sequence[str] = ARM_JOINT_NAMES) -> list[int]:
    """Where each of ``joint_names`` stands in a message's ``names``; ValueError naming the message
    (``what``) and the joints it lacks."""
    index = {name: i for i, name in enumerate(names)}
    missing = [n for n in joint_names if n not in index]
    if missing:
        raise ValueError(f"{what} lacks joints {missing}")
    return [index[n] for n in joint_names]


def parse_joint_state(msg: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """(arm_qpos [7], arm_qvel [7], finger distance) from a JointState, by joint name."""
    order = joint_order(msg.name, "JointState")
    qpos = np.array([msg.position[i] for i in order])
    qvel = np.array([msg.velocity[i] for i in order]) if len(msg.velocity) else np.zeros(7)
    fingers = [i for i, name in enumerate(msg.name) if name in FINGER_JOINT_NAMES]
    return qpos, qvel, float(sum(msg.position[i] for i in fingers))


def parse_trajectory(msg: Any, joint_names: Sequence[str] = ARM_JOINT_NAMES) -> np.ndarray:
    """Arm targets [T, J] of a JointTrajectory's points, reordered by name to ``joint_names``."""
    order = joint_order(msg.joint_names, "JointTrajectory", joint_names)
    rows = [np.asarray(point.positions, dtype=np.float64)[order] for point in msg.points]
    return np.array(rows).reshape(len(rows), len(order))


def parse_image(msg: Any) -> np.ndarray:
    """uint8 [H, W, 3] RGB of an 8-bit image (rgb8, bgr8, rgba8, bgra8 or mono8; rows may be padded)."""
    if msg.encoding not in _ENCODINGS:
        raise ValueError(f"unsupported image encoding {msg.encoding!r}; expected one of {sorted(_ENCODINGS)}")
    channels, order = _ENCODINGS[msg.encoding]
    data = np.frombuffer(msg.data, np.uint8) if isinstance(msg.data, bytes) else msg.data  # ROS 1: bytes
    rows = np.asarray(data, dtype=np.uint8).reshape(msg.height, msg.step)
    pixels = rows[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
    return np.ascontiguousarray(pixels[..., list(order)])


# ------------------------------------------------------------------------------ compressed images
def encode_image(rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> bytes:
    """uint8 [H, W, 3] RGB as a jpeg or png file (imageio's Pillow plugin)."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unsupported image format {fmt!r}; expected one of {IMAGE_FORMATS}")
    pixels = np.ascontiguousarray(rgb, dtype=np.uint8)
    if fmt == "jpeg":
        return iio.imwrite("<bytes>", pixels, extension=".jpg", quality=quality)
    return iio.imwrite("<bytes>", pixels, extension=".png")


def compressed_format(fmt: str) -> str:
    """The ``format`` string compressed_image_transport writes for an rgb8 source (informational:
    decoders read the file's own header; the file itself holds true RGB whatever it says)."""
    return f"rgb8; {fmt} compressed bgr8"


def decode_image(data: bytes | bytearray | np.ndarray, fmt: str = "") -> np.ndarray:
    """uint8 [H, W, 3] RGB of a jpeg or png file (grey or RGBA files are converted); ``fmt`` is the
    message's ``format`` string. Raises ValueError for anything that does not decode, including
    compressed_depth_image_transport's ``compressedDepth`` (16-bit depth, not a camera image)."""
    if "compressedDepth" in fmt:
        raise ValueError(f"compressed depth images are not camera images (format {fmt!r})")
    raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
    try:
        rgb = iio.imread(raw, plugin="pillow", mode="RGB")
    except Exception as error:  # Pillow and imageio raise OSError, ValueError, SyntaxError, ...
        reason = f"cannot decode compressed image (format {fmt!r}, {len(raw)} bytes): {error}"
        raise ValueError(reason) from error
    return np.ascontiguousarray(rgb, dtype=np.uint8)


def parse_compressed_image(msg: Any) -> np.ndarray:
    """uint8 [H, W, 3] RGB of a jpeg or png sensor_msgs/CompressedImage; ValueError when it does not
    decode."""
    return decode_image(msg.data, msg.format)


def tcp_pose_xyzw(kinematics: ArmKinematics, arm_qpos_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TCP position [3] (m) and orientation quaternion [4] (x, y, z, w: ROS order, unit norm) in the
    arm's base frame at joint angles [7], by forward kinematics of the training model."""
    position, rotation = kinematics.tcp_pose(arm_qpos_rad)
    wxyz = np.empty(4)
    mujoco.mju_mat2Quat(wxyz, rotation.reshape(-1))  # MuJoCo's order is w first
    return position, wxyz[[1, 2, 3, 0]]
