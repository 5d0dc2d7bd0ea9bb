"""The standard message variants of the robot side: CompressedImage in; Float64MultiArray and
PoseStamped out (besides the default Image in, JointTrajectory out), over ROS 1 and ROS 2.

No roscore and no DDS participant: ROS 1 messages are the real rospy (genpy) classes and ROS 2
messages rosbags' objects. The robot-level tests fake only the transport: over ROS 1,
``rospy.Subscriber``/``rospy.Publisher`` and "is the node initialised" are replaced (monkeypatch) by
fakes that hand preloaded messages to the robot's callbacks at once and keep what is published;
over ROS 2, the node (``node_factory``). Both fakes pass every message through its wire format
(genpy serialisation, rosbags CDR) as the declared type, so a message of another type than the
publisher or subscription declares fails the test.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from vla_rl.real_world.deploy_config import compose_deploy_config
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand, RobotError
from vla_rl.real_world.ros1 import messages as m1
from vla_rl.real_world.transports import build_robot

from vla_rl.config.load import ConfigError
from vla_rl.envs.config import EnvConfig

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


@pytest.fixture(scope="module")
def kinematics() -> ArmKinematics:
    return ArmKinematics()


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
def rospy() -> Any:
    from vla_rl.real_world.ros1 import import_rospy

    try:
        return import_rospy()
    except ImportError as error:
        pytest.skip(str(error))


def ros1_wire(msg: Any, msg_type: type) -> Any:
    """``msg`` serialised by genpy and read back as ``msg_type`` (what a subscriber would get)."""
    assert isinstance(msg, msg_type), f"{type(msg).__name__} is not {msg_type.__name__}"
    buffer = io.BytesIO()
    msg.serialize(buffer)
    return msg_type().deserialize(buffer.getvalue())


def test_ros1_compressed_image_round_trip(rospy: Any) -> None:
    from sensor_msgs.msg import CompressedImage

    rgb = smooth_image()
    png = ros1_wire(m1.compressed_image_message(CompressedImage, rospy, STAMP_S, rgb, "png"), CompressedImage)
    np.testing.assert_array_equal(m1.parse_compressed_image(png), rgb)  # png is lossless
    jpeg = m1.compressed_image_message(CompressedImage, rospy, STAMP_S, rgb, "jpeg")
    jpeg = ros1_wire(jpeg, CompressedImage)
    assert "jpeg" in jpeg.format and jpeg.data[:2] == b"\xff\xd8"
    assert jpeg.header.stamp.to_sec() == pytest.approx(STAMP_S, abs=1e-6)
    assert_jpeg_close(m1.parse_compressed_image(jpeg), rgb)


def test_ros1_command_messages(rospy: Any, kinematics: ArmKinematics) -> None:
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    array = ros1_wire(
        m1.float64_array_message(Float64MultiArray, MultiArrayDimension, TARGET), Float64MultiArray
    )
    np.testing.assert_array_equal(array.data, TARGET)
    assert array.layout.dim[0].size == 7

    position, quat = m1.tcp_pose_xyzw(kinematics, TARGET)
    pose = m1.pose_stamped_message(PoseStamped, rospy, STAMP_S, position, quat, "panda_link0")
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


def ros1_joint_state(rospy: Any) -> Any:
    from sensor_msgs.msg import JointState

    return m1.joint_state_message(JointState, rospy, STAMP_S, TARGET - 0.1, np.zeros(7), 0.04)


def test_ros1_robot_defaults_are_raw_images_and_joint_trajectory(rospy: Any, fake_ros1: Any) -> None:
    from sensor_msgs.msg import Image
    from trajectory_msgs.msg import JointTrajectory
    from vla_rl.real_world.ros1.robot import Ros1Robot, Ros1RobotConfig

    rgb = smooth_image(8, 6)
    transport = fake_ros1(
        {
            "/joint_states": [ros1_joint_state(rospy)],
            "/camera/front/image_raw": [m1.image_message(Image, rospy, STAMP_S, rgb)],
        }
    )
    with Ros1Robot(Ros1RobotConfig(cameras=("front",), image_size=(8, 6))) as robot:
        assert transport.subscriptions["/camera/front/image_raw"] is Image
        np.testing.assert_array_equal(robot.get_observation().images["front"], rgb)
        robot.send_action(JointCommand(TARGET, 0.03, stamp_s=STAMP_S))
    command = transport.publishers["/joint_command"]
    assert command.data_class is JointTrajectory
    np.testing.assert_array_equal(m1.parse_trajectory(command.sent[-1])[0], TARGET)


@pytest.mark.parametrize("command_type", COMMAND_TYPES)
def test_ros1_robot_compressed_images_and_command_type(
    rospy: Any, fake_ros1: Any, kinematics: ArmKinematics, command_type: str
) -> None:
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import CompressedImage
    from std_msgs.msg import Float64, Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory
    from vla_rl.real_world.ros1.robot import Ros1Robot, Ros1RobotConfig

    rgb = smooth_image()
    good = m1.compressed_image_message(CompressedImage, rospy, STAMP_S, rgb, "png")
    broken = m1.compressed_image_message(CompressedImage, rospy, STAMP_S + 0.01, rgb, "jpeg")
    broken.data = broken.data[:100]
    depth = m1.compressed_image_message(CompressedImage, rospy, STAMP_S + 0.02, rgb, "png")
    depth.format = "16UC1; compressedDepth"
    transport = fake_ros1(
        {
            "/joint_states": [ros1_joint_state(rospy)],
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


# ------------------------------------------------------------------------------ ROS 2
@pytest.fixture(scope="module")
def m2() -> Any:
    pytest.importorskip("rosbags", reason="rosbags is not installed")
    pytest.importorskip("cyclonedds", reason="cyclonedds (Python binding) is not installed")
    from vla_rl.real_world.ros2 import messages

    return messages


def ros2_wire(msg: Any, msgtype: str) -> Any:
    """``msg`` as rosbags' CDR of ``msgtype`` and read back (what a DDS reader would get)."""
    from vla_rl.real_world.ros2.types import typestore

    assert msg.__msgtype__ == msgtype, f"{msg.__msgtype__} is not {msgtype}"
    return typestore().deserialize_cdr(typestore().serialize_cdr(msg, msgtype), msgtype)


def test_ros2_compressed_image_round_trip(m2: Any) -> None:
    rgb = smooth_image()
    png = ros2_wire(m2.compressed_image_message(STAMP_S, rgb, "png"), m2.COMPRESSED_IMAGE)
    np.testing.assert_array_equal(m2.parse_compressed_image(png), rgb)
    jpeg = ros2_wire(m2.compressed_image_message(STAMP_S, rgb, "jpeg"), m2.COMPRESSED_IMAGE)
    assert "jpeg" in jpeg.format and m2.stamp_seconds(jpeg.header.stamp) == pytest.approx(STAMP_S)
    assert_jpeg_close(m2.parse_compressed_image(jpeg), rgb)
    jpeg.data = jpeg.data[:50]
    with pytest.raises(ValueError, match="cannot decode"):
        m2.parse_compressed_image(jpeg)


def test_ros2_command_messages(m2: Any, kinematics: ArmKinematics) -> None:
    array = ros2_wire(m2.float64_array_message(TARGET, label="joints"), m2.FLOAT64_MULTI_ARRAY)
    np.testing.assert_array_equal(array.data, TARGET)
    position, quat = m1.tcp_pose_xyzw(kinematics, TARGET)
    pose = ros2_wire(m2.pose_stamped_message(STAMP_S, position, quat, "panda_link0"), m2.POSE_STAMPED)
    assert pose.header.frame_id == "panda_link0"
    assert m2.stamp_seconds(pose.header.stamp) == pytest.approx(STAMP_S)
    assert_pose_is_fk(pose.pose, kinematics, TARGET)


class FakeRos2Publisher:
    def __init__(self, msgtype: str) -> None:
        self.msgtype, self.sent = msgtype, []

    def publish(self, msg: Any) -> None:
        self.sent.append(ros2_wire(msg, self.msgtype))

    def subscription_count(self) -> int:
        return 1


class FakeRos2Node:
    """The node interface without DDS (as in test_ros2_dds.py): preloaded messages, CDR round
    tripped as the subscription's type, arrive as soon as their topic is subscribed."""

    def __init__(self, preload: dict[str, list[Any]]) -> None:
        self.preload = preload
        self.publishers: dict[str, FakeRos2Publisher] = {}
        self.subscriptions: dict[str, str] = {}

    def publisher(self, topic: str, msgtype: str, qos: str = "reliable") -> FakeRos2Publisher:
        self.publishers[topic] = FakeRos2Publisher(msgtype)
        return self.publishers[topic]

    def subscription(self, topic: str, msgtype: str, callback: Any = None, qos: str = "sensor_data") -> None:
        self.subscriptions[topic] = msgtype
        for msg in self.preload.get(topic, []):
            callback(ros2_wire(msg, msgtype))

    def close(self) -> None:
        pass


@pytest.mark.parametrize("command_type", COMMAND_TYPES)
def test_ros2_robot_compressed_images_and_command_type(
    m2: Any, kinematics: ArmKinematics, command_type: str
) -> None:
    from vla_rl.real_world.ros2.robot import Ros2Robot, Ros2RobotConfig

    rgb = smooth_image()
    joints = m2.joint_state_message(STAMP_S, m1.ARM_JOINT_NAMES, TARGET - 0.1, np.zeros(7))
    broken = m2.compressed_image_message(STAMP_S + 0.01, rgb, "jpeg")
    broken.data = broken.data[:100]
    node = FakeRos2Node(
        {
            "/joint_states": [joints],
            "/camera/front/image_raw/compressed": [m2.compressed_image_message(STAMP_S, rgb, "png"), broken],
        }
    )
    config = Ros2RobotConfig(
        cameras=("front",),
        image_size=(48, 64),
        image_transport="compressed",
        command_type=command_type,  # type: ignore[arg-type]
    )
    with Ros2Robot(config, node_factory=lambda: node) as robot:
        assert node.subscriptions["/camera/front/image_raw/compressed"] == m2.COMPRESSED_IMAGE
        obs = robot.get_observation()
        np.testing.assert_array_equal(obs.images["front"], rgb)
        assert obs.image_stamps_s["front"] == pytest.approx(STAMP_S)
        assert robot.dropped["images"] == 1
        robot.send_action(JointCommand(TARGET, 0.03, stamp_s=STAMP_S))
    command = node.publishers["/joint_command"]
    expected = {
        "joint_trajectory": m2.JOINT_TRAJECTORY,
        "float64_multi_array": m2.FLOAT64_MULTI_ARRAY,
        "pose_stamped": m2.POSE_STAMPED,
    }
    assert command.msgtype == expected[command_type]
    assert len(command.sent) == 1
    assert_command_is(command.sent[0], command_type, kinematics, m2.parse_trajectory, m2.stamp_seconds)
    gripper = node.publishers["/gripper_command"]
    assert gripper.msgtype == m2.FLOAT64_MULTI_ARRAY
    np.testing.assert_allclose(gripper.sent[-1].data, [0.03])


# ------------------------------------------------------------------------------ configuration
def test_deploy_config_defaults_and_pass_through() -> None:
    default = compose_deploy_config([])
    assert (default.robot.image_transport, default.robot.command_type) == ("raw", "joint_trajectory")
    assert default.robot.pose_frame_id == "panda_link0"
    overrides = ["robot.simulated=false", "max_steps=10", "robot.image_transport=compressed"]
    overrides += ["robot.command_type=pose_stamped", "robot.pose_frame_id=fr3_link0"]
    for transport in ("ros1", "ros2"):
        cfg = compose_deploy_config([*overrides, f"robot.transport={transport}"])
        robot = build_robot(cfg, EnvConfig(task="reach"))
        assert robot.safety.config == cfg.safety  # behind the safety layer
        config: Any = robot.robot.config  # type: ignore[attr-defined]
        passed = (config.image_transport, config.command_type, config.pose_frame_id)
        assert passed == ("compressed", "pose_stamped", "fr3_link0")


REAL_ARM = ["robot.simulated=false", "max_steps=5"]


@pytest.mark.parametrize(
    ("overrides", "key", "reason"),
    [
        (["robot.image_transport=theora"], "robot.image_transport", "must be one of"),
        ([*REAL_ARM, "robot.command_type=joint_velocity"], "robot.command_type", "must be one of"),
        (["robot.command_type=pose_stamped"], "robot.command_type", "sim-robot takes JointTrajectory only"),
        (
            [*REAL_ARM, "robot.command_type=pose_stamped", "robot.pose_frame_id="],
            "robot.pose_frame_id",
            "base",
        ),
    ],
)
def test_deploy_config_rejects_bad_variants(overrides: list[str], key: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'.*{reason}"):
        compose_deploy_config(overrides)
