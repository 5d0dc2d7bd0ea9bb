"""The simulated robot as a ROS 1 node: joint states, images and task state out, joint targets in.

Runs one world of a MuJoCo task at a fixed control rate, like a robot driver's joint position
mode: each period it steps towards the latest targets (holding the last ones when no new command
came) and publishes what it measured, stamped with the time of publication. Episodes start on a
seed sent to ``/sim/reset``; ``/sim/status`` reports the episode, step, success and the latency of
the commands it applies. ``vla-rl sim-robot`` starts it. The transport-independent part (stepping,
stale commands, latencies, statistics, the messages of each period) is
``vla_rl.real_world.sim_node_core.SimNodeCore``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vla_rl.real_world import ros_messages as m
from vla_rl.real_world.ros1.messages import Ros1Messages
from vla_rl.real_world.sim_node_core import SimNodeCore
from vla_rl.real_world.topics import RobotTopics

from vla_rl.envs.config import EnvConfig


class Ros1SimNode(SimNodeCore):
    """Publishes a ``SimulatedRobot`` over ROS 1 and applies the joint targets it receives."""

    def __init__(
        self,
        env_cfg: EnvConfig,
        topics: RobotTopics | None = None,
        stats_path: Path | None = None,
        image_transport: str = "raw",
    ) -> None:
        super().__init__(env_cfg, stats_path, image_transport=image_transport)
        self.messages = messages = Ros1Messages()
        rospy, t = messages.rospy, topics or RobotTopics()
        self.topics = t
        if not rospy.core.is_initialized():
            rospy.init_node("vla_rl_sim_robot", disable_signals=True)
        rospy.on_shutdown(self.stop)

        def publisher(topic: str, msgtype: str, queue_size: int = 2) -> Any:
            return rospy.Publisher(topic, messages.type(msgtype), queue_size=queue_size, tcp_nodelay=True)

        def subscriber(topic: str, msgtype: str, callback: Any) -> Any:
            return rospy.Subscriber(topic, messages.type(msgtype), callback, queue_size=4, tcp_nodelay=True)

        self.joint_pub = publisher(t.joint_states, m.JOINT_STATE)
        self.image_pubs = {c: publisher(*m.image_channel(t, c, image_transport)) for c in self.sim.cameras}
        self.task_pub = publisher(t.task_state, m.FLOAT64_MULTI_ARRAY)
        self.status_pub = publisher(t.sim_status, m.FLOAT64_MULTI_ARRAY, queue_size=8)
        self._subs = [
            subscriber(t.command, m.JOINT_TRAJECTORY, self.on_command_message),
            subscriber(t.gripper_command, "std_msgs/msg/Float64", lambda msg: self.on_gripper(msg.data)),
            subscriber(t.sim_reset, m.INT64, self.on_reset_message),
        ]

    def close(self) -> None:
        for sub in self._subs:
            sub.unregister()
        super().close()
