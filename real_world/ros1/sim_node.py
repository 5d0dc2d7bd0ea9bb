"""The simulated robot as a ROS 1 node: joint states, images and task state out, joint targets in.

Runs one world of a MuJoCo task at a fixed control rate, like a robot driver's joint position
mode: each period it steps towards the latest targets (holding the last ones when no new command
came) and publishes what it measured, stamped with the time of publication. Episodes start on a
seed sent to ``/sim/reset``; ``/sim/status`` reports the episode, step, success and the latency of
the commands it applies. ``vla-rl sim-robot`` starts it. The transport-independent part (stepping,
stale commands, latencies, statistics) is ``vla_rl.real_world.sim_node_core.SimNodeCore``.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from vla_rl.real_world.ros1 import import_rospy
from vla_rl.real_world.ros1.messages import (
    float64_array_message,
    image_message,
    joint_state_message,
    parse_trajectory,
)
from vla_rl.real_world.sim_node_core import SimNodeCore, status_values
from vla_rl.real_world.sim_robot import SimSnapshot
from vla_rl.real_world.topics import SIM_STATUS_FIELDS, RobotTopics

from vla_rl.envs.config import EnvConfig

log = logging.getLogger(__name__)


class Ros1SimNode:
    """Publishes a ``SimulatedRobot`` over ROS 1 and applies the joint targets it receives."""

    def __init__(
        self, env_cfg: EnvConfig, topics: RobotTopics | None = None, stats_path: Path | None = None
    ) -> None:
        self.rospy = rospy = import_rospy()
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import Float64, Float64MultiArray, Int64, MultiArrayDimension
        from trajectory_msgs.msg import JointTrajectory

        self._types = {
            "joint": JointState,
            "image": Image,
            "array": Float64MultiArray,
            "dim": MultiArrayDimension,
        }
        self.topics = topics or RobotTopics()
        self.core = SimNodeCore(env_cfg, stats_path)
        if not rospy.core.is_initialized():
            rospy.init_node("vla_rl_sim_robot", disable_signals=True)
        t = self.topics
        self._joint_pub = rospy.Publisher(t.joint_states, JointState, queue_size=2, tcp_nodelay=True)
        self._image_pubs = {
            c: rospy.Publisher(t.image_topic(c), Image, queue_size=2, tcp_nodelay=True)
            for c in self.core.sim.cameras
        }
        self._task_pub = rospy.Publisher(t.task_state, Float64MultiArray, queue_size=2, tcp_nodelay=True)
        self._status_pub = rospy.Publisher(t.sim_status, Float64MultiArray, queue_size=8, tcp_nodelay=True)
        self._subs = [
            rospy.Subscriber(t.command, JointTrajectory, self._on_command, queue_size=4, tcp_nodelay=True),
            rospy.Subscriber(t.gripper_command, Float64, self._on_gripper, queue_size=4, tcp_nodelay=True),
            rospy.Subscriber(t.sim_reset, Int64, self._on_reset, queue_size=4),
        ]

    # ------------------------------------------------------------------------ callbacks
    def _on_command(self, msg: Any) -> None:
        arrival_s = time.time()
        self.core.on_command(parse_trajectory(msg), msg.header.stamp.to_sec(), arrival_s)

    def _on_gripper(self, msg: Any) -> None:
        self.core.on_gripper(float(msg.data))

    def _on_reset(self, msg: Any) -> None:
        self.core.on_reset(int(msg.data))

    # ------------------------------------------------------------------------ loop
    def tick(self) -> SimSnapshot:
        """One control period: a pending reset, else a physics step; then publish."""
        return self.core.tick(self._publish)

    def spin(self, max_seconds: float = math.inf) -> None:
        """Tick at the task's control rate until ROS shuts down (or ``max_seconds`` pass)."""
        rate = self.rospy.Rate(self.core.sim.control_hz)
        deadline = time.monotonic() + max_seconds
        log.info("simulated robot running at %.1f Hz", self.core.sim.control_hz)
        while not self.rospy.is_shutdown() and time.monotonic() < deadline:
            self.tick()
            rate.sleep()

    def _publish(self, snapshot: SimSnapshot, stamp_s: float, latency_s: float) -> None:
        rospy, types = self.rospy, self._types
        array_types = (types["array"], types["dim"])
        joint = joint_state_message(
            types["joint"],
            rospy,
            stamp_s,
            snapshot.arm_qpos_rad,
            snapshot.arm_qvel_rad_s,
            snapshot.gripper_opening_m,
        )
        for camera, publisher in self._image_pubs.items():
            publisher.publish(image_message(types["image"], rospy, stamp_s, snapshot.images[camera]))
        if snapshot.task_state is not None:
            self._task_pub.publish(float64_array_message(*array_types, snapshot.task_state, "task_state"))
        status = status_values(snapshot, stamp_s, latency_s)
        self._status_pub.publish(float64_array_message(*array_types, status, ",".join(SIM_STATUS_FIELDS)))
        # The joint state goes last: a subscriber woken by it finds the images and task state of the
        # same period already delivered (each topic has its own connection, so this is likely, not certain).
        self._joint_pub.publish(joint)

    def write_stats(self) -> None:
        """Command latencies and dropped commands as JSON (atomically: write, then rename)."""
        self.core.write_stats()

    def close(self) -> None:
        for sub in self._subs:
            sub.unregister()
        self.core.close()
