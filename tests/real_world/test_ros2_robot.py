"""``Ros2Robot`` in process, against a node without DDS (``ros2_fakes.FakeNode``): observations,
commands and image encodings. The same robot against a driver process over DDS is in
``test_ros2_dds.py``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds (Python binding) is not installed")
pytest.importorskip("rosbags", reason="rosbags is not installed")

from ros2_fakes import FakeNode  # noqa: E402
from ros2_peer import FINGERS, JOINTS, STAMP_S, image_pattern  # noqa: E402
from vla_rl.real_world import ros_messages as m  # noqa: E402
from vla_rl.real_world.robot import JointCommand, RobotError  # noqa: E402
from vla_rl.real_world.ros2.messages import ROS2, stamp_seconds  # noqa: E402
from vla_rl.real_world.ros2.robot import Ros2Robot, Ros2RobotConfig  # noqa: E402


def _joint_state(stamp_s: float = STAMP_S) -> Any:
    position = np.concatenate([np.arange(7) * 0.1, [0.01, 0.015]])
    return ROS2.joint_state_message(stamp_s, [*JOINTS, *FINGERS], position, np.arange(9) * 0.01)


def test_robot_connect_times_out_without_joint_state() -> None:
    node = FakeNode()
    robot = Ros2Robot(Ros2RobotConfig(connect_timeout_s=0.05), node_factory=lambda: node)
    with pytest.raises(RobotError, match="no joint state"):
        robot.connect()
    assert node.closed and not robot.is_connected


def test_robot_observation_and_commands() -> None:
    rgb = image_pattern(4, 5)
    bgr_padded = ROS2.image_message(STAMP_S, rgb[..., ::-1])
    bgr_padded.encoding, bgr_padded.step = "bgr8", 16  # rows padded to 16 bytes
    bgr_padded.data = np.concatenate([np.pad(row, (0, 1)) for row in rgb[..., ::-1].reshape(4, 15)])
    node = FakeNode(
        {
            "/joint_states": [
                _joint_state(),
                ROS2.joint_state_message(STAMP_S + 1, FINGERS, np.array([0.02, 0.02])),
            ],
            "/camera/front/image_raw": [bgr_padded],
            "/task_state": [ROS2.float64_array_message([1.0, 2.0])],
        }
    )
    config = Ros2RobotConfig(
        cameras=("front",), image_size=(4, 5), task_state_dim=2, gripper_joint_names=FINGERS
    )
    with Ros2Robot(config, node_factory=lambda: node) as robot:
        obs = robot.get_observation()
        assert sorted(robot.observation_features) == [
            "arm_qpos_rad",
            "arm_qvel_rad_s",
            "gripper_opening_m",
            "rgb_front",
            "task_state",
        ]
        np.testing.assert_allclose(obs.arm_qpos_rad, np.arange(7) * 0.1)
        np.testing.assert_allclose(obs.arm_qvel_rad_s, np.arange(7) * 0.01)
        assert obs.gripper_opening_m == pytest.approx(0.04)  # the later finger-only message
        assert obs.joint_state_stamp_s == pytest.approx(STAMP_S)
        np.testing.assert_array_equal(obs.images["front"], rgb)
        np.testing.assert_allclose(obs.task_state, [1.0, 2.0])

        sent = robot.send_action(JointCommand(np.full(7, 0.5), 0.03, stamp_s=5.0))
        assert sent.gripper_opening_m == 0.03
        trajectory = node.publishers["/joint_command"].sent[-1]
        assert list(trajectory.joint_names) == list(JOINTS)
        assert (trajectory.header.stamp.sec, trajectory.header.stamp.nanosec) == (0, 0)  # start on arrival
        assert len(trajectory.points) == 1
        assert stamp_seconds(trajectory.points[0].time_from_start) == pytest.approx(0.05)
        np.testing.assert_allclose(node.publishers["/gripper_command"].sent[-1].data, [0.03])

        chunk = [JointCommand(np.full(7, 0.1 * i), 0.01 * i) for i in range(4)]
        robot.send_trajectory(chunk, dt_s=0.1)
        trajectory = node.publishers["/joint_command"].sent[-1]
        np.testing.assert_allclose(m.parse_trajectory(trajectory), np.stack([c.arm_qpos_rad for c in chunk]))
        times = [stamp_seconds(p.time_from_start) for p in trajectory.points]
        np.testing.assert_allclose(times, [0.1, 0.2, 0.3, 0.4])
        np.testing.assert_allclose(node.publishers["/gripper_command"].sent[-1].data, [0.0])
    assert node.closed and not robot.is_connected


def test_robot_float64_multi_array_commands() -> None:
    node = FakeNode({"/joint_states": [_joint_state()]})
    config = Ros2RobotConfig(command_type="float64_multi_array", gripper_command_scale=0.5)
    with Ros2Robot(config, node_factory=lambda: node) as robot:
        robot.send_action(JointCommand(np.arange(7.0), 0.08))
        assert node.publishers["/joint_command"].msgtype == "std_msgs/msg/Float64MultiArray"
        np.testing.assert_allclose(node.publishers["/joint_command"].sent[-1].data, np.arange(7.0))
        np.testing.assert_allclose(node.publishers["/gripper_command"].sent[-1].data, [0.04])
        with pytest.raises(RobotError, match="joint_trajectory"):
            robot.send_trajectory([JointCommand(np.zeros(7), 0.0)], dt_s=0.1)


def test_parse_image_encodings() -> None:
    rgb = image_pattern(3, 2)
    for encoding, pixels in [
        ("rgb8", rgb),
        ("bgr8", rgb[..., ::-1]),
        ("rgba8", np.concatenate([rgb, np.full((3, 2, 1), 255, np.uint8)], axis=-1)),
        ("bgra8", np.concatenate([rgb[..., ::-1], np.zeros((3, 2, 1), np.uint8)], axis=-1)),
    ]:
        msg = ROS2.image_message(0.0, rgb)
        msg.encoding, msg.step, msg.data = encoding, pixels.shape[1] * pixels.shape[2], pixels.reshape(-1)
        np.testing.assert_array_equal(m.parse_image(msg), rgb)
    mono = ROS2.image_message(0.0, rgb)
    mono.encoding, mono.step, mono.data = "mono8", 2, rgb[..., 0].reshape(-1)
    np.testing.assert_array_equal(m.parse_image(mono), np.repeat(rgb[..., :1], 3, axis=-1))
    mono.encoding = "16UC1"
    with pytest.raises(ValueError, match="encoding"):
        m.parse_image(mono)


def test_a_new_joint_state_waits_up_to_image_wait_s_for_the_frame_of_its_period() -> None:
    import threading
    import time

    rgb = image_pattern(4, 5)
    node = FakeNode(
        {"/joint_states": [_joint_state()], "/camera/front/image_raw": [ROS2.image_message(STAMP_S, rgb)]}
    )
    config = Ros2RobotConfig(
        cameras=("front",), image_size=(4, 5), gripper_joint_names=FINGERS, image_wait_s=2.0
    )
    with Ros2Robot(config, node_factory=lambda: node) as robot:
        joints, frames = node.subscriptions["/joint_states"], node.subscriptions["/camera/front/image_raw"]
        # The next period's joint state now, its frame 0.2 s later: the wait ends when the frame comes.
        later = STAMP_S + 0.05
        frame = ROS2.image_message(later, rgb[::-1].copy())
        threading.Timer(0.2, frames.put, (frame,)).start()
        start = time.monotonic()
        joints.put(_joint_state(later))
        assert robot.wait_for_new_observation(STAMP_S, timeout_s=1.0)
        assert 0.15 < time.monotonic() - start < 1.9
        obs = robot.get_observation()
        assert obs.extras["unsynced_cameras"] == [] and obs.image_stamps_s["front"] == pytest.approx(later)
        np.testing.assert_array_equal(obs.images["front"], rgb[::-1])

    quick = Ros2RobotConfig(
        cameras=("front",), image_size=(4, 5), gripper_joint_names=FINGERS, image_wait_s=0.05
    )
    second = FakeNode(node.preload)
    with Ros2Robot(quick, node_factory=lambda: second) as robot:
        # A frame that never comes: the observation is used after image_wait_s, marked unsynced.
        second.subscriptions["/joint_states"].put(_joint_state(STAMP_S + 0.05))
        start = time.monotonic()
        assert robot.wait_for_new_observation(STAMP_S, timeout_s=1.0)
        assert 0.04 < time.monotonic() - start < 0.5
        assert robot.get_observation().extras["unsynced_cameras"] == ["front"]
