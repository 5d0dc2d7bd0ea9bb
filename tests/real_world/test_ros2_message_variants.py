"""The standard message variants of the robot side over ROS 2: CompressedImage in; Float64MultiArray
and PoseStamped out (besides the default Image in, JointTrajectory out).

No DDS participant: messages are rosbags' objects. The robot-level tests fake only the node
(``node_factory``); every message passes through rosbags' CDR as the declared type, so a message of
another type than the publisher or subscription declares fails the test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from message_checks import (
    COMMAND_TYPES,
    STAMP_S,
    TARGET,
    assert_command_is,
    assert_jpeg_close,
    assert_pose_is_fk,
    smooth_image,
)
from ros2_fakes import FakeNode, cdr_round_trip
from vla_rl.real_world import ros_messages as rm
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand


@pytest.fixture(scope="module")
def m2() -> Any:
    pytest.importorskip("rosbags", reason="rosbags is not installed")
    pytest.importorskip("cyclonedds", reason="cyclonedds (Python binding) is not installed")
    from vla_rl.real_world.ros2 import messages

    return messages


def test_ros2_compressed_image_round_trip(m2: Any) -> None:
    rgb = smooth_image()
    png = cdr_round_trip(m2.ROS2.compressed_image_message(STAMP_S, rgb, "png"), rm.COMPRESSED_IMAGE)
    np.testing.assert_array_equal(rm.parse_compressed_image(png), rgb)
    jpeg = cdr_round_trip(m2.ROS2.compressed_image_message(STAMP_S, rgb, "jpeg"), rm.COMPRESSED_IMAGE)
    assert "jpeg" in jpeg.format and m2.stamp_seconds(jpeg.header.stamp) == pytest.approx(STAMP_S)
    assert_jpeg_close(rm.parse_compressed_image(jpeg), rgb)
    jpeg.data = jpeg.data[:50]
    with pytest.raises(ValueError, match="cannot decode"):
        rm.parse_compressed_image(jpeg)


def test_ros2_command_messages(m2: Any, kinematics: ArmKinematics) -> None:
    array = cdr_round_trip(m2.ROS2.float64_array_message(TARGET, label="joints"), rm.FLOAT64_MULTI_ARRAY)
    np.testing.assert_array_equal(array.data, TARGET)
    position, quat = rm.tcp_pose_xyzw(kinematics, TARGET)
    pose = cdr_round_trip(
        m2.ROS2.pose_stamped_message(STAMP_S, position, quat, "panda_link0"), rm.POSE_STAMPED
    )
    assert pose.header.frame_id == "panda_link0"
    assert m2.stamp_seconds(pose.header.stamp) == pytest.approx(STAMP_S)
    assert_pose_is_fk(pose.pose, kinematics, TARGET)


@pytest.mark.parametrize("command_type", COMMAND_TYPES)
def test_ros2_robot_compressed_images_and_command_type(
    m2: Any, kinematics: ArmKinematics, command_type: str
) -> None:
    from vla_rl.real_world.ros2.robot import Ros2Robot, Ros2RobotConfig

    rgb = smooth_image()
    joints = m2.ROS2.joint_state_message(STAMP_S, rm.ARM_JOINT_NAMES, TARGET - 0.1, np.zeros(7))
    broken = m2.ROS2.compressed_image_message(STAMP_S + 0.01, rgb, "jpeg")
    broken.data = broken.data[:100]
    node = FakeNode(
        wire=True,
        preload={
            "/joint_states": [joints],
            "/camera/front/image_raw/compressed": [
                m2.ROS2.compressed_image_message(STAMP_S, rgb, "png"),
                broken,
            ],
        },
    )
    config = Ros2RobotConfig(
        cameras=("front",),
        image_size=(48, 64),
        image_transport="compressed",
        command_type=command_type,  # type: ignore[arg-type]
    )
    with Ros2Robot(config, node_factory=lambda: node) as robot:
        assert node.types["/camera/front/image_raw/compressed"] == rm.COMPRESSED_IMAGE
        obs = robot.get_observation()
        np.testing.assert_array_equal(obs.images["front"], rgb)
        assert obs.image_stamps_s["front"] == pytest.approx(STAMP_S)
        assert robot.dropped["images"] == 1
        robot.send_action(JointCommand(TARGET, 0.03, stamp_s=STAMP_S))
    command = node.publishers["/joint_command"]
    expected = {
        "joint_trajectory": rm.JOINT_TRAJECTORY,
        "float64_multi_array": rm.FLOAT64_MULTI_ARRAY,
        "pose_stamped": rm.POSE_STAMPED,
    }
    assert command.msgtype == expected[command_type]
    assert len(command.sent) == 1
    assert_command_is(command.sent[0], command_type, kinematics, rm.parse_trajectory, m2.stamp_seconds)
    gripper = node.publishers["/gripper_command"]
    assert gripper.msgtype == rm.FLOAT64_MULTI_ARRAY
    np.testing.assert_allclose(gripper.sent[-1].data, [0.03])
