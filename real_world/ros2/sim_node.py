"""The simulated robot as a ROS 2 node (DDS from Python, or rclpy): the ROS 1 node's twin.

Same topics and behaviour as ``vla_rl.real_world.ros1.sim_node.Ros1SimNode`` (the shared part is
``vla_rl.real_world.sim_node_core.SimNodeCore``), with ROS 2's message types:

* published (reliable, which best-effort and reliable subscriptions both match): ``joint_states``
  (sensor_msgs/JointState: ``joint1..7`` and both fingers at half the opening each), one
  sensor_msgs/Image (rgb8) per camera (with ``image_transport='compressed'`` a jpeg
  sensor_msgs/CompressedImage on its topic + ``/compressed``), ``task_state`` and ``sim_status``
  (std_msgs/Float64MultiArray; the status holds ``SIM_STATUS_FIELDS``, its ``stamp_s`` that of the
  joint state as float seconds);
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

import time
from pathlib import Path
from typing import Any

from vla_rl.real_world import ros_messages as m
from vla_rl.real_world.ros2.dds import Node
from vla_rl.real_world.ros2.messages import ROS2, stamp_seconds, time_msg
from vla_rl.real_world.ros2.nodes import make_node
from vla_rl.real_world.sim_node_core import SimNodeCore
from vla_rl.real_world.sim_robot import SimulatedRobot
from vla_rl.real_world.topics import RobotTopics

from vla_rl.envs.config import EnvConfig


def ros2_now_s() -> float:
    """The current time as ROS 2 carries it (sec, nanosec), read back as float seconds."""
    return stamp_seconds(time_msg(time.time()))


class Ros2SimNode(SimNodeCore):
    """Publishes a ``SimulatedRobot`` over ROS 2 and applies the joint targets it receives.

    ``node`` defaults to a ``DdsNode`` on ``domain_id`` with ``dds_config`` (None:
    ``CYCLONEDDS_URI``, as ``Ros2Robot``), or an rclpy node with ``backend='rclpy'``.
    """

    messages = ROS2

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
        image_transport: str = "raw",
    ) -> None:
        super().__init__(env_cfg, stats_path, clock=ros2_now_s, sim=sim, image_transport=image_transport)
        self.topics = t = topics or RobotTopics()
        self.gripper_command_scale = gripper_command_scale
        self.node = node if node is not None else make_node(backend, domain_id, dds_config)
        try:
            self.joint_pub = self.node.publisher(t.joint_states, m.JOINT_STATE)
            channels = {c: m.image_channel(t, c, image_transport) for c in self.sim.cameras}
            self.image_pubs = {c: self.node.publisher(*channel) for c, channel in channels.items()}
            self.task_pub = self.node.publisher(t.task_state, m.FLOAT64_MULTI_ARRAY)
            self.status_pub = self.node.publisher(t.sim_status, m.FLOAT64_MULTI_ARRAY)
            self.node.subscription(t.command, m.JOINT_TRAJECTORY, self.on_command_message, "reliable")
            self.node.subscription(t.gripper_command, m.FLOAT64_MULTI_ARRAY, self._on_gripper, "reliable")
            self.node.subscription(t.sim_reset, m.INT64, self.on_reset_message, "reliable")
        except BaseException:
            self.node.close()
            super().close()
            raise

    def _on_gripper(self, msg: Any) -> None:
        if len(msg.data):
            self.on_gripper(float(msg.data[0]) / self.gripper_command_scale)

    def close(self) -> None:
        self.stop()
        self.node.close()
        super().close()
