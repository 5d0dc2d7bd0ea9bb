"""The simulated robot and its control over ROS 2 (DDS from Python), and end to end: ``vla-rl sim-robot
robot.transport=ros2`` in one process, ``vla-rl deploy robot.transport=ros2`` with a policy trained by
``vla-rl train`` in another, compared with direct evaluation on the same seeds.

The in-process tests use a fake node and a fake world (no DDS participant, no MuJoCo). The end-to-end
test runs inside a private network namespace made with ``unshare -n`` (only ``lo``): cyclonedds
opens sockets on every interface, so no participant is ever created outside one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds (Python binding) is not installed")
pytest.importorskip("rosbags", reason="rosbags is not installed")

from namespaces import private_namespace_unavailable, rehearse  # noqa: E402
from ros2_fakes import FakeNode  # noqa: E402
from vla_rl.real_world import ros_messages as m  # noqa: E402
from vla_rl.real_world.policy_runner import load_trained_policy  # noqa: E402
from vla_rl.real_world.ros2.messages import ROS2, stamp_seconds  # noqa: E402
from vla_rl.real_world.ros2.sim_control import INT64, Ros2SimControl  # noqa: E402
from vla_rl.real_world.ros2.sim_node import Ros2SimNode  # noqa: E402
from vla_rl.real_world.ros2.types import message  # noqa: E402
from vla_rl.real_world.sim_eval import evaluate_on_seeds  # noqa: E402
from vla_rl.real_world.sim_robot import SimSnapshot  # noqa: E402
from vla_rl.real_world.topics import SIM_STATUS_FIELDS, RobotTopics  # noqa: E402

from vla_rl.envs.config import EnvConfig  # noqa: E402

EPISODES = 16
SEED = 1000
JOINTS = tuple(f"joint{i}" for i in range(1, 8))


# ------------------------------------------------------------------------------ in process: fakes
class FakeWorld:
    """What the node needs of ``SimulatedRobot``: episodes of three steps; the arm goes to its targets."""

    control_hz = 20.0
    cameras = ("front",)

    def __init__(self) -> None:
        self.episode, self.step_index, self.done = -1, 0, True
        self.arm, self.opening = np.zeros(7), 0.04
        self.closed = False

    def _snapshot(self) -> SimSnapshot:
        return SimSnapshot(
            arm_qpos_rad=self.arm.copy(),
            arm_qvel_rad_s=np.zeros(7),
            gripper_opening_m=self.opening,
            images={"front": np.full((4, 5, 3), self.step_index, np.uint8)},
            task_state=np.array([1.0, 2.0]),
            episode=self.episode,
            step=self.step_index,
            success=self.step_index >= 2,
            done=self.done,
        )

    def reset(self, seed: int) -> SimSnapshot:
        self.episode += 1
        self.step_index, self.done = 0, False
        self.arm = np.full(7, float(seed))
        return self._snapshot()

    def set_targets(self, arm_qpos_rad: Any = None, gripper_opening_m: Any = None) -> None:
        if arm_qpos_rad is not None:
            self.target = np.asarray(arm_qpos_rad, dtype=np.float64)
        if gripper_opening_m is not None:
            self.target_opening = float(gripper_opening_m)

    def step(self) -> SimSnapshot:
        if not self.done:
            self.step_index += 1
            self.arm = getattr(self, "target", self.arm)
            self.opening = getattr(self, "target_opening", self.opening)
            self.done = self.step_index >= 3
        return self._snapshot()

    def close(self) -> None:
        self.closed = True


def _trajectory(positions: np.ndarray, stamp_s: float, names: tuple[str, ...] = JOINTS) -> Any:
    return ROS2.trajectory_message(names, positions, 0.05, stamp_s)


def test_sim_node_publishes_ros2_messages_and_applies_commands(tmp_path: Path) -> None:
    node, world = FakeNode(), FakeWorld()
    topics = RobotTopics()
    sim_node = Ros2SimNode(
        EnvConfig(task="reach"),
        topics,
        stats_path=tmp_path / "stats.json",
        node=node,
        sim=world,  # type: ignore[arg-type]
        gripper_command_scale=0.5,
    )
    assert node.types[topics.command] == m.JOINT_TRAJECTORY
    assert node.types[topics.gripper_command] == m.FLOAT64_MULTI_ARRAY
    assert node.types[topics.sim_reset] == INT64
    commands, reset = node.subscriptions[topics.command], node.subscriptions[topics.sim_reset]
    stale = _trajectory(np.ones((1, 7)), 1.0)
    commands.put(stale)  # before any episode: dropped

    reset.put(message(INT64, data=7))
    sim_node.tick()
    joint = node.publishers[topics.joint_states].sent[-1]
    status = dict(zip(SIM_STATUS_FIELDS, node.publishers[topics.sim_status].sent[-1].data, strict=True))
    stamp_s = stamp_seconds(joint.header.stamp)
    # The status's float stamp is exactly what a receiver reads back from the header.
    assert status["stamp_s"] == stamp_s and status["episode"] == 0 and status["step"] == 0
    assert math.isnan(status["command_latency_s"])
    assert list(joint.name) == [*JOINTS, "finger_joint1", "finger_joint2"]
    np.testing.assert_array_equal(joint.position, [*[7.0] * 7, 0.02, 0.02])
    image = node.publishers[topics.image_topic("front")].sent[-1]
    assert image.encoding == "rgb8" and stamp_seconds(image.header.stamp) == stamp_s
    np.testing.assert_array_equal(m.parse_image(image), np.zeros((4, 5, 3), np.uint8))
    assert list(node.publishers[topics.task_state].sent[-1].data) == [1.0, 2.0]

    # A command stamped with that observation (as Ros2Robot stamps it, in another joint order):
    # applied, its latency measured. One stamped just before the episode began: dropped.
    target = np.linspace(0.1, 0.7, 7)
    commands.put(_trajectory(target[::-1][None], stamp_s, JOINTS[::-1]))
    commands.put(_trajectory(np.zeros((1, 7)), stamp_s - 1e-6))
    node.subscriptions[topics.gripper_command].put(ROS2.float64_array_message([0.01], "gripper"))
    sim_node.tick()
    np.testing.assert_allclose(world.arm, target)
    assert world.opening == pytest.approx(0.02)  # 0.01 / scale 0.5
    status = dict(zip(SIM_STATUS_FIELDS, node.publishers[topics.sim_status].sent[-1].data, strict=True))
    assert status["step"] == 1 and 0 <= status["command_latency_s"] < 5.0
    assert sim_node.dropped_commands == 2 and len(sim_node.latencies_s) == 1
    with pytest.raises(ValueError, match="lacks joints"):
        sim_node.on_command_message(_trajectory(np.zeros((1, 6)), stamp_s, JOINTS[:6]))

    sim_node.tick()
    sim_node.tick()  # the last step: statistics written
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats == {"latencies_s": sim_node.latencies_s, "dropped_commands": 2}
    sim_node.close()
    assert node.closed and world.closed


def test_sim_node_publishes_jpeg_frames_on_the_compressed_topic_when_asked() -> None:
    node, world = FakeNode(), FakeWorld()
    topics = RobotTopics()
    sim_node = Ros2SimNode(
        EnvConfig(task="reach"),
        topics,
        node=node,
        sim=world,
        image_transport="compressed",  # type: ignore[arg-type]
    )
    compressed = topics.image_topic("front") + "/compressed"
    assert node.types[compressed] == m.COMPRESSED_IMAGE and topics.image_topic("front") not in node.publishers
    sim_node.on_reset(3)
    sim_node.tick()
    sim_node.tick()  # step 1: every pixel 1 (a flat frame survives jpeg)
    frame = node.publishers[compressed].sent[-1]
    assert frame.format.startswith("rgb8; jpeg")
    joint = node.publishers[topics.joint_states].sent[-1]
    assert stamp_seconds(frame.header.stamp) == stamp_seconds(joint.header.stamp)
    np.testing.assert_array_equal(m.parse_compressed_image(frame), np.ones((4, 5, 3), np.uint8))
    sim_node.close()


def test_sim_node_spins_at_the_control_rate_until_stopped() -> None:
    node, world = FakeNode(), FakeWorld()
    sim_node = Ros2SimNode(EnvConfig(task="reach"), node=node, sim=world)  # type: ignore[arg-type]
    sim_node.spin(max_seconds=0.26)
    stamps = [stamp_seconds(msg.header.stamp) for msg in node.publishers["/joint_states"].sent]
    assert 3 <= len(stamps) <= 7  # 20 Hz for 0.26 s: 6 periods (fewer on a loaded machine, never more)
    assert np.all(np.diff(stamps) > 0) and (stamps[-1] - stamps[0]) / (len(stamps) - 1) > 0.04
    sim_node.stop()
    sim_node.spin(max_seconds=10.0)  # returns at once
    sim_node.close()


def _status(episode: int, step: int, stamp_s: float, done: float = 0.0) -> Any:
    return ROS2.float64_array_message(
        [episode, step, 0.0, done, math.nan, stamp_s], ",".join(SIM_STATUS_FIELDS)
    )


def test_sim_control_resets_and_matches_status_by_stamp() -> None:
    node, topics = FakeNode(), RobotTopics()
    control = Ros2SimControl(topics, node=node)
    status_sub = node.subscriptions[topics.sim_status]
    # The robot answers a seed with the first period of the next episode.
    node.publishers[topics.sim_reset].on_publish = lambda msg: status_sub.put(_status(3, 0, 100.5))
    status_sub.put(_status(2, 50, 100.45, done=1.0))
    first = control.reset(seed=1007, timeout_s=2.0)
    assert node.publishers[topics.sim_reset].sent[-1].data == 1007
    assert first.episode == 3 and first.step == 0 and first.stamp_s == 100.5
    status_sub.put(_status(3, 1, 100.55))
    assert control.status_at(100.55, 0.1).step == 1
    assert control.status_at(100.6, 0.05) is None
    node.publishers[topics.sim_reset].on_publish = None
    from vla_rl.real_world.robot import RobotError

    with pytest.raises(RobotError, match="did not start an episode"):
        control.reset(seed=1, timeout_s=0.1)
    control.close()
    assert node.closed


# ------------------------------------------------------------------------------ end to end in a namespace
def test_deploy_over_ros2_succeeds_as_often_as_direct_evaluation(reach_run: Path, tmp_path: Path) -> None:
    reason = private_namespace_unavailable()
    if reason:
        pytest.skip(reason)
    overrides = ["robot.transport=ros2", f"checkpoint={reach_run}", f"episodes={EPISODES}", f"seed={SEED}"]
    result = rehearse(tmp_path, overrides)
    assert result["transport"] == "ros2"
    deploy = result["deploy"]
    direct = evaluate_on_seeds(load_trained_policy(reach_run), [SEED + i for i in range(EPISODES)])
    over_ros = [episode["success"] for episode in deploy["per_episode"]]
    assert len(over_ros) == EPISODES and None not in over_ros
    latencies = np.asarray(result["sim"]["latencies_s"])
    print(
        f"success over ROS 2 {np.mean(over_ros):.3f}, direct {np.mean(direct):.3f} ({EPISODES} episodes); "
        f"command latency p50 {1e3 * np.median(latencies):.2f} ms, "
        f"p99 {1e3 * np.percentile(latencies, 99):.2f} ms; "
        f"dropped commands {result['sim']['dropped_commands']}"
    )
    assert abs(np.mean(over_ros) - np.mean(direct)) <= 0.10
    assert np.mean(direct) >= 0.75, "the fixture's policy should solve reach"
    # Every episode ran to the task's time limit at the robot's pace, and commands arrived.
    assert all(episode["steps"] >= 45 for episode in deploy["per_episode"])
    assert len(latencies) >= 0.9 * sum(episode["steps"] for episode in deploy["per_episode"])
    assert np.median(latencies) < 0.05  # one control period at 20 Hz
