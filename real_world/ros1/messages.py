"""Conversions between ROS 1 messages and the robot interface's numpy types.

Message classes are passed in (rospy comes from the system and is imported on first use), so this
module imports no ROS. The ROS-free parts, the image codec and the TCP pose as a quaternion, are
also what ``vla_rl.real_world.ros2.messages`` uses for its CompressedImage and PoseStamped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import imageio.v3 as iio
import mujoco
import numpy as np
from vla_rl.real_world.robot import JointCommand

if TYPE_CHECKING:
    from vla_rl.real_world.kinematics import ArmKinematics

ARM_JOINT_NAMES = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINT_NAMES = ("finger_joint1", "finger_joint2")
COMPRESSED_SUFFIX = "/compressed"
"""image_transport's convention: a camera's CompressedImage lives on its image topic + this."""
IMAGE_FORMATS = ("jpeg", "png")


def joint_order(names: Sequence[str], what: str, joint_names: Sequence[str] = ARM_JOINT_NAMES) -> list[int]:
    """Where each of ``joint_names`` stands in a message's ``names``; ValueError naming the message
    (``what``) and the joints it lacks."""
    index = {name: i for i, name in enumerate(names)}
    missing = [n for n in joint_names if n not in index]
    if missing:
        raise ValueError(f"{what} lacks joints {missing}")
    return [index[n] for n in joint_names]


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
    order = joint_order(msg.name, "JointState")
    qpos = np.array([msg.position[i] for i in order])
    qvel = np.array([msg.velocity[i] for i in order]) if msg.velocity else np.zeros(7)
    fingers = [i for i, name in enumerate(msg.name) if name in FINGER_JOINT_NAMES]
    return qpos, qvel, float(sum(msg.position[i] for i in fingers))


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
    order = joint_order(msg.joint_names, "JointTrajectory")
    return [np.asarray(point.positions, dtype=np.float64)[order] for point in msg.points]


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


def compressed_image_message(
    msg_type: type, rospy: Any, stamp_s: float, rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90
) -> Any:
    """sensor_msgs/CompressedImage (jpeg or png) of uint8 [H, W, 3] RGB."""
    msg = msg_type()
    msg.header.stamp = rospy.Time.from_sec(stamp_s)
    msg.format = compressed_format(fmt)
    msg.data = encode_image(rgb, fmt, quality)
    return msg


def parse_compressed_image(msg: Any) -> np.ndarray:
    """uint8 [H, W, 3] RGB of a sensor_msgs/CompressedImage; ValueError when it does not decode."""
    return decode_image(msg.data, msg.format)


# ------------------------------------------------------------------------------ other command types
def float64_array_message(array_type: type, dim_type: type, values: np.ndarray, label: str = "") -> Any:
    """std_msgs/Float64MultiArray of a vector (one layout dimension, ``label``), as a
    forward_command_controller takes."""
    data = [float(v) for v in np.asarray(values, dtype=np.float64).reshape(-1)]
    msg = array_type()
    msg.layout.dim = [dim_type(label=label, size=len(data), stride=len(data))]
    msg.data = data
    return msg


def tcp_pose_xyzw(kinematics: ArmKinematics, arm_qpos_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TCP position [3] (m) and orientation quaternion [4] (x, y, z, w: ROS order, unit norm) in the
    arm's base frame at joint angles [7], by forward kinematics of the training model."""
    position, rotation = kinematics.tcp_pose(arm_qpos_rad)
    wxyz = np.empty(4)
    mujoco.mju_mat2Quat(wxyz, rotation.reshape(-1))  # MuJoCo's order is w first
    return position, wxyz[[1, 2, 3, 0]]


def pose_stamped_message(
    msg_type: type, rospy: Any, stamp_s: float, position: np.ndarray, quat_xyzw: np.ndarray, frame_id: str
) -> Any:
    """geometry_msgs/PoseStamped of a position (m) and an (x, y, z, w) quaternion in ``frame_id``."""
    msg = msg_type()
    msg.header.stamp = rospy.Time.from_sec(stamp_s)
    msg.header.frame_id = frame_id
    p, q = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(v) for v in position)
    q.x, q.y, q.z, q.w = (float(v) for v in quat_xyzw)
    return msg
