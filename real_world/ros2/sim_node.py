"""The simulated robot as a ROS 2 node (DDS from Python, or rclpy): the ROS 1 node's twin.

Same topics and behaviour as ``vla_rl.real_world.ros1.sim_node.Ros1SimNode`` (the shared part is
``vla_rl.real_world.sim_node_core.SimNodeCore``), with ROS 2's message types:

* published (reliable, which best-effort and reliable subscriptions both match): ``joint_states``
  (sensor_msgs/JointState: ``joint1..7`` and both fingers at half the opening each), one
  sensor_msgs/Image (rgb8) per camera, ``task_state`` and ``sim_status`` (std_msgs/Float64MultiArray;
  the status holds ``SIM_STATUS_FIELDS``, its ``stamp_s`` that of the joint state as float seconds);
* subscribed (reliable): ``command`` (trajectory_msgs/JointTrajectory; the first point is applied,
  the header stamp must be the observation it was computed from), ``gripper_command``
  (std_msgs/Float64MultiArray, ``data[0] = opening_m * gripper_command_scale``, what ``Ros2Robot``
  publishes) and ``sim_reset`` (std_msgs/Int64: start an episode from this seed).

ROS 2 stamps are integer seconds and nanoseconds, so every period is stamped with the current time
rounded to the nanosecond: the float seconds a receiver reads back from a header
(``sec + nanosec * 1e-9``) equal the status's ``stamp_s`` exactly, and so does a command's header
stamp that was set from them.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from vla_rl.real_world.ros1.messages import ARM_JOINT_NAMES, FINGER_JOINT_NAMES, joint_order
from vla_rl.real_world.ros2 import messages as m
from vla_rl.real_world.ros2.dds import Node
from vla_rl.real_world.ros2.nodes import make_node
from vla_rl.real_world.ros2.sim_control import INT64
from vla_rl.real_world.sim_node_core import SimNodeCore, status_values
from vla_rl.real_world.sim_robot import SimSnapshot, SimulatedRobot
from vla_rl.real_world.topics import SIM_STATUS_FIELDS, RobotTopics

from vla_rl.envs.config import EnvConfig


def ros2_now_s() -> float:
    """The current time as ROS 2 carries it (sec, nanosec), read back as float seconds."""
    return m.stamp_seconds(m.time_msg(time.time()))


def arm_targets(msg: Any, joint_names: Sequence[str] = ARM_JOINT_NAMES) -> list[np.ndarray]:
    """Arm targets of each point of a JointTrajectory, reordered by joint name."""
    order = joint_order(msg.joint_names, "JointTrajectory", joint_names)
    return [row[order] for row in m.parse_trajectory(msg)]


class Ros2SimNode:
    """Publishes a ``SimulatedRobot`` over ROS 2 and applies the joint targets it receives.

    ``node`` defaults to a ``DdsNode`` on ``domain_id`` with ``dds_config`` (None:
    ``CYCLONEDDS_URI``, as ``Ros2Robot``), or an rclpy node with ``backend='rclpy'``.
    """

    def __init__(
        self,
        env_cfg: EnvConfig,
        topics: RobotTopics | None = None,
        stats_path: Path | None = None,
        *,
        node: Node | None = None,
        backend: str = "dds",
        domain_id: int = 0,
        dds_config: str | None = None,
        gripper_command_scale: float = 1.0,
        sim: SimulatedRobot | None = None,
    ) -> None:
        self.topics = topics or RobotTopics()
        self.gripper_command_scale = gripper_command_scale
        self.core = SimNodeCore(env_cfg, stats_path, clock=ros2_now_s, sim=sim)
        self._stop = threading.Event()
        self.node = node if node is not None else make_node(backend, domain_id, dds_config)
        try:
            t = self.topics
            self._joint_pub = self.node.publisher(t.joint_states, m.JOINT_STATE)
            self._image_pubs = {
                c: self.node.publisher(t.image_topic(c), m.IMAGE) for c in self.core.sim.cameras
            }
            self._task_pub = self.node.publisher(t.task_state, m.FLOAT64_MULTI_ARRAY)
            self._status_pub = self.node.publisher(t.sim_status, m.FLOAT64_MULTI_ARRAY)
            self.node.subscription(t.command, m.JOINT_TRAJECTORY, self._on_command, "reliable")
            self.node.subscription(t.gripper_command, m.FLOAT64_MULTI_ARRAY, self._on_gripper, "reliable")
            self.node.subscription(t.sim_reset, INT64, self._on_reset, "reliable")
        except BaseException:
            self.node.close()
            self.core.close()
            raise

    # ------------------------------------------------------------------------ callbacks
    def _on_command(self, msg: Any) -> None:
        arrival_s = time.time()
        self.core.on_command(arm_targets(msg), m.stamp_seconds(msg.header.stamp), arrival_s)

    def _on_gripper(self, msg: Any) -> None:
        if len(msg.data):
            self.core.on_gripper(float(msg.data[0]) / self.gripper_command_scale)

    def _on_reset(self, msg: Any) -> None:
        self.core.on_reset(int(msg.data))

    # ------------------------------------------------------------------------ loop
    def tick(self) -> SimSnapshot:
        """One control period: a pending reset, else a physics step; then publish."""
        return self.core.tick(self._publish)

    def spin(self, max_seconds: float = math.inf) -> None:
        """Tick at the task's control rate until ``stop`` is called (or ``max_seconds`` pass)."""
        self.core.spin(self._publish, max_seconds, self._stop)

    def stop(self) -> None:
        """Make ``spin`` return after the current period (from another thread)."""
        self._stop.set()

    def _publish(self, snapshot: SimSnapshot, stamp_s: float, latency_s: float) -> None:
        for camera, publisher in self._image_pubs.items():
            publisher.publish(m.image_message(stamp_s, snapshot.images[camera], frame_id=camera))
        if snapshot.task_state is not None:
            self._task_pub.publish(m.float64_array_message(snapshot.task_state, "task_state"))
        status = status_values(snapshot, stamp_s, latency_s)
        self._status_pub.publish(m.float64_array_message(status, ",".join(SIM_STATUS_FIELDS)))
        opening = snapshot.gripper_opening_m
        position = np.concatenate([snapshot.arm_qpos_rad, [opening / 2, opening / 2]])
        velocity = np.concatenate([snapshot.arm_qvel_rad_s, [0.0, 0.0]])
        joint = m.joint_state_message(stamp_s, ARM_JOINT_NAMES + FINGER_JOINT_NAMES, position, velocity)
        # The joint state goes last: a subscriber woken by it likely (not certainly: one DDS writer
        # per topic) has the images and task state of the same period already.
        self._joint_pub.publish(joint)

    def write_stats(self) -> None:
        """Command latencies and dropped commands as JSON (atomically: write, then rename)."""
        self.core.write_stats()

    def close(self) -> None:
        self._stop.set()
        self.node.close()
        self.core.close()
