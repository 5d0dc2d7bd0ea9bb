"""The standard message variants of the robot side over ROS 1: CompressedImage in; Float64MultiArray
and PoseStamped out (besides the default Image in, JointTrajectory out).

No roscore: messages are the real rospy (genpy) classes. The robot-level tests fake only the
transport: ``rospy.Subscriber``/``rospy.Publisher`` and "is the node initialised" are replaced
(monkeypatch) by fakes that hand preloaded messages to the robot's callbacks at once and keep what is
published; every message passes through genpy serialisation as the declared type, so a message of
another type than the publisher or subscription declares fails the test.
"""

from __future__ import annotations

import io
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
    joint_targets,
    quat_xyzw_to_matrix,
    smooth_image,
)
from vla_rl.real_world import ros_messages as m1
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand, RobotError


def test_tcp_pose_quaternion_matches_fk(kinematics: ArmKinematics) -> None:
    for q in joint_targets():
        position, quat = m1.tcp_pose_xyzw(kinematics, q)
        fk_position, fk_rotation = kinematics.tcp_pose(q)
        np.testing.assert_allclose(position, fk_position)
        assert np.linalg.norm(quat) == pytest.approx(1.0, abs=1e-12)
        np.testing.assert_allclose(quat_xyzw_to_matrix(quat), fk_rotation, atol=1e-9)


def test_decode_failures_are_value_errors() -> None:
    jpeg = m1.encode_image(smooth_image(), "jpeg")
    for data, fmt in [(b"", "jpeg"), (b"not an image", "png"), (jpeg[: len(jpeg) // 2], "jpeg")]:
        with pytest.raises(ValueError, match="cannot decode"):
            m1.decode_image(data, fmt)
    with pytest.raises(ValueError, match="depth"):
        m1.decode_image(m1.encode_image(smooth_image(), "png"), "16UC1; compressedDepth")
    with pytest.raises(ValueError, match="format"):
        m1.encode_image(smooth_image(), "webp")


# ------------------------------------------------------------------------------ ROS 1
@pytest.fixture(scope="module")
def ros1() -> Any:
    from vla_rl.real_world.ros1.messages import Ros1Messages

    try:
        return Ros1Messages()
    except ImportError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def rospy(ros1: Any) -> Any:
    return ros1.rospy


def ros1_wire(msg: Any, msg_type: type) -> Any:
    """``msg`` serialised by genpy and read back as ``msg_type`` (what a subscriber would get)."""
    assert isinstance(msg, msg_type), f"{type(msg).__name__} is not {msg_type.__name__}"
    buffer = io.BytesIO()
    msg.serialize(buffer)
    return msg_type().deserialize(buffer.getvalue())


def test_ros1_compressed_image_round_trip(ros1: Any) -> None:
    from sensor_msgs.msg import CompressedImage

    rgb = smooth_image()
    png = ros1_wire(ros1.compressed_image_message(STAMP_S, rgb, "png"), CompressedImage)
    np.testing.assert_array_equal(m1.parse_compressed_image(png), rgb)  # png is lossless
    jpeg = ros1.compressed_image_message(STAMP_S, rgb, "jpeg")
    jpeg = ros1_wire(jpeg, CompressedImage)
    assert "jpeg" in jpeg.format and jpeg.data[:2] == b"\xff\xd8"
    assert jpeg.header.stamp.to_sec() == pytest.approx(STAMP_S, abs=1e-6)
    assert_jpeg_close(m1.parse_compressed_image(jpeg), rgb)


def test_ros1_command_messages(ros1: Any, kinematics: ArmKinematics) -> None:
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Float64MultiArray

    array = ros1_wire(ros1.float64_array_message(TARGET), Float64MultiArray)
    np.testing.assert_array_equal(array.data, TARGET)
    assert array.layout.dim[0].size == 7

    position, quat = m1.tcp_pose_xyzw(kinematics, TARGET)
    pose = ros1.pose_stamped_message(STAMP_S, position, quat, "panda_link0")
    pose = ros1_wire(pose, PoseStamped)
    assert pose.header.frame_id == "panda_link0"
    assert pose.header.stamp.to_sec() == pytest.approx(STAMP_S, abs=1e-6)
    assert_pose_is_fk(pose.pose, kinematics, TARGET)


class FakeRos1Publisher:
    """rospy.Publisher without a master: keeps what is published, as read back in its declared type."""

    def __init__(self, topic: str, data_class: type, **_: Any) -> None:
        self.topic, self.data_class, self.sent = topic, data_class, []
        FakeRos1Transport.current.publishers[topic] = self

    def publish(self, msg: Any) -> None:
        self.sent.append(ros1_wire(msg, self.data_class))

    def get_num_connections(self) -> int:
        return 1

    def unregister(self) -> None:
        pass


class FakeRos1Subscriber:
    """rospy.Subscriber without a master: the preloaded messages of its topic, serialised and read
    back as its declared type, go to the callback at once (in the subscribing thread)."""

    def __init__(
        self, topic: str, data_class: type, callback: Any, callback_args: Any = None, **_: Any
    ) -> None:
        transport = FakeRos1Transport.current
        transport.subscriptions[topic] = data_class
        for msg in transport.preload.get(topic, []):
            args = () if callback_args is None else (callback_args,)
            callback(ros1_wire(msg, data_class), *args)

    def unregister(self) -> None:
        pass


class FakeRos1Transport:
    current: FakeRos1Transport

    def __init__(self, preload: dict[str, list[Any]]) -> None:
        self.preload = preload
        self.publishers: dict[str, FakeRos1Publisher] = {}
        self.subscriptions: dict[str, type] = {}
        FakeRos1Transport.current = self


@pytest.fixture
def fake_ros1(rospy: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(rospy, "Publisher", FakeRos1Publisher)
    monkeypatch.setattr(rospy, "Subscriber", FakeRos1Subscriber)
    monkeypatch.setattr(rospy.core, "is_initialized", lambda: True)  # no init_node, no master
    return FakeRos1Transport


def ros1_joint_state(ros1: Any) -> Any:
    names = m1.ARM_JOINT_NAMES + m1.FINGER_JOINT_NAMES
    return ros1.joint_state_message(STAMP_S, names, [*(TARGET - 0.1), 0.02, 0.02], np.zeros(9))


def test_ros1_robot_defaults_are_raw_images_and_joint_trajectory(ros1: Any, fake_ros1: Any) -> None:
    from sensor_msgs.msg import Image
    from trajectory_msgs.msg import JointTrajectory
    from vla_rl.real_world.ros1.robot import Ros1Robot, Ros1RobotConfig

    rgb = smooth_image(8, 6)
    transport = fake_ros1(
        {
            "/joint_states": [ros1_joint_state(ros1)],
            "/camera/front/image_raw": [ros1.image_message(STAMP_S, rgb)],
        }
    )
    with Ros1Robot(Ros1RobotConfig(cameras=("front",), image_size=(8, 6))) as robot:
        assert transport.subscriptions["/camera/front/image_raw"] is Image
        np.testing.assert_array_equal(robot.get_observation().images["front"], rgb)
        robot.send_action(JointCommand(TARGET, 0.03, stamp_s=STAMP_S))
    command = transport.publishers["/joint_command"]
    assert command.data_class is JointTrajectory
    np.testing.assert_array_equal(m1.parse_trajectory(command.sent[-1])[0], TARGET)


def test_ros1_robot_crops_and_resizes_a_larger_frame_to_the_policys_size(ros1: Any, fake_ros1: Any) -> None:
    from vla_rl.real_world.camera_view import policy_view
    from vla_rl.real_world.ros1.robot import Ros1Robot, Ros1RobotConfig

    rgb = smooth_image(48, 64)  # what the camera publishes
    fake_ros1(
        {
            "/joint_states": [ros1_joint_state(ros1)],
            "/camera/front/image_raw": [ros1.image_message(STAMP_S, rgb)],
            "/camera/wrist/image_raw": [ros1.image_message(STAMP_S, rgb)],
        }
    )
    crops = {"front": (8, 16, 32, 32)}
    config = Ros1RobotConfig(cameras=("front", "wrist"), image_size=(16, 16), image_crops=crops)
    with Ros1Robot(config) as robot:
        images = robot.get_observation().images
        assert robot.observation_features["rgb_front"].shape == (16, 16, 3)
    np.testing.assert_array_equal(images["front"], policy_view(rgb[8:40, 16:48], (16, 16)))
    np.testing.assert_array_equal(images["wrist"], policy_view(rgb, (16, 16)))  # whole frame, squeezed
    # The front crop's top-left output pixel averages the top-left of the region, not the frame's.
    assert abs(int(images["front"][0, 0, 0]) - int(rgb[8:10, 16:18, 0].mean())) <= 2


@pytest.mark.parametrize("command_type", COMMAND_TYPES)
def test_ros1_robot_compressed_images_and_command_type(
    ros1: Any, fake_ros1: Any, kinematics: ArmKinematics, command_type: str
) -> None:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import CompressedImage
    from std_msgs.msg import Float64, Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory
    from vla_rl.real_world.ros1.robot import Ros1Robot, Ros1RobotConfig

    rgb = smooth_image()
    good = ros1.compressed_image_message(STAMP_S, rgb, "png")
    broken = ros1.compressed_image_message(STAMP_S + 0.01, rgb, "jpeg")
    broken.data = broken.data[:100]
    depth = ros1.compressed_image_message(STAMP_S + 0.02, rgb, "png")
    depth.format = "16UC1; compressedDepth"
    transport = fake_ros1(
        {
            "/joint_states": [ros1_joint_state(ros1)],
            "/camera/front/image_raw/compressed": [good, broken, depth],
        }
    )
    config = Ros1RobotConfig(
        cameras=("front",), image_size=(48, 64), image_transport="compressed", command_type=command_type
    )
    with Ros1Robot(config) as robot:
        assert transport.subscriptions["/camera/front/image_raw/compressed"] is CompressedImage
        assert "/camera/front/image_raw" not in transport.subscriptions
        obs = robot.get_observation()
        np.testing.assert_array_equal(obs.images["front"], rgb)
        assert obs.image_stamps_s["front"] == pytest.approx(STAMP_S, abs=1e-6)
        assert robot.dropped["images"] == 2  # the truncated jpeg and the depth image
        sent = robot.send_action(JointCommand(TARGET, 0.03, stamp_s=STAMP_S))
        np.testing.assert_array_equal(sent.arm_qpos_rad, TARGET)
        if command_type != "joint_trajectory":
            with pytest.raises(RobotError, match="joint_trajectory"):
                robot.send_trajectory([JointCommand(TARGET, 0.03)] * 2, STAMP_S)
    command = transport.publishers["/joint_command"]
    expected = {"joint_trajectory": JointTrajectory, "float64_multi_array": Float64MultiArray}
    assert command.data_class is expected.get(command_type, PoseStamped)
    assert len(command.sent) == 1
    assert_command_is(command.sent[0], command_type, kinematics, m1.parse_trajectory, lambda t: t.to_sec())
    gripper = transport.publishers["/gripper_command"]  # unchanged: std_msgs/Float64
    assert gripper.data_class is Float64 and gripper.sent[-1].data == pytest.approx(0.03)
