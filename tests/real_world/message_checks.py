"""Checks shared by the message-variant tests of ROS 1 and ROS 2 (``test_ros*_message_variants.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from vla_rl.real_world.kinematics import ArmKinematics

STAMP_S = 1_700_000_000.25
TARGET = np.array([0.1, -0.4, 0.2, -2.1, 0.05, 1.9, 0.7])
"""A joint target inside the Panda's limits."""
COMMAND_TYPES = ("joint_trajectory", "float64_multi_array", "pose_stamped")


def smooth_image(height: int = 48, width: int = 64) -> np.ndarray:
    """uint8 RGB with a different gradient per channel (JPEG keeps it close; swapped channels would
    not be)."""
    y, x = np.mgrid[0:height, 0:width]
    channels = [x * 255 / (width - 1), y * 255 / (height - 1), (x + y) * 255 / (height + width - 2)]
    return np.stack(channels, axis=-1).round().astype(np.uint8)


def assert_jpeg_close(decoded: np.ndarray, rgb: np.ndarray) -> None:
    assert decoded.dtype == np.uint8 and decoded.shape == rgb.shape
    error = np.abs(decoded.astype(int) - rgb.astype(int))
    assert error.mean() < 2.0 and error.max() <= 12, (error.mean(), error.max())


def quat_xyzw_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w), written out independently of MuJoCo."""
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def assert_pose_is_fk(pose: Any, kinematics: ArmKinematics, arm_qpos_rad: np.ndarray) -> None:
    """A geometry_msgs Pose (ROS 1 or 2) is the TCP pose of ``arm_qpos_rad``: the FK position and a
    unit (x, y, z, w) quaternion of the FK rotation."""
    p, o = pose.position, pose.orientation
    position, rotation = kinematics.tcp_pose(arm_qpos_rad)
    quat = np.array([o.x, o.y, o.z, o.w])
    np.testing.assert_allclose([p.x, p.y, p.z], position)
    assert np.linalg.norm(quat) == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(quat_xyzw_to_matrix(quat), rotation, atol=1e-9)


def assert_command_is(
    msg: Any, command_type: str, kinematics: ArmKinematics, parse_trajectory: Any, stamp_of: Any
) -> None:
    """The arm command ``msg`` (ROS 1 or 2) of ``command_type`` carries ``TARGET`` sent at ``STAMP_S``."""
    if command_type == "joint_trajectory":
        np.testing.assert_array_equal(parse_trajectory(msg)[0], TARGET)
    elif command_type == "float64_multi_array":
        np.testing.assert_array_equal(msg.data, TARGET)
    else:
        assert msg.header.frame_id == "panda_link0"
        assert stamp_of(msg.header.stamp) == pytest.approx(STAMP_S, abs=1e-6)
        assert_pose_is_fk(msg.pose, kinematics, TARGET)


def joint_targets(count: int = 5) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [TARGET, *(TARGET + rng.uniform(-0.8, 0.8, 7) for _ in range(count - 1))]
