"""The deployment side's handle on ``vla-rl sim-robot`` over ROS 1: start episodes, read success."""

from __future__ import annotations

from vla_rl.real_world.ros1 import import_rospy
from vla_rl.real_world.sim_control import SimStatus, StatusHistory
from vla_rl.real_world.topics import RobotTopics


class Ros1SimControl(StatusHistory):
    """Publishes seeds to ``topics.sim_reset`` and keeps the recent ``topics.sim_status`` messages."""

    def __init__(self, topics: RobotTopics) -> None:
        super().__init__()
        rospy = import_rospy()
        from std_msgs.msg import Float64MultiArray, Int64

        if not rospy.core.is_initialized():
            rospy.init_node("vla_rl_deploy", anonymous=True, disable_signals=True)
        self._int = Int64
        self._reset_pub = rospy.Publisher(topics.sim_reset, Int64, queue_size=4)
        on_status = lambda msg: self.add(msg.data)  # noqa: E731
        self._sub = rospy.Subscriber(topics.sim_status, Float64MultiArray, on_status, queue_size=16)
        self.topics = topics

    def reset(self, seed: int, timeout_s: float = 10.0) -> SimStatus:
        """Start a new episode from ``seed``; returns the status of its first period."""
        return self.start_episode(
            lambda: self._reset_pub.publish(self._int(int(seed))),
            lambda: self._reset_pub.get_num_connections() > 0,
            timeout_s,
        )

    def close(self) -> None:
        self._sub.unregister()
        self._reset_pub.unregister()
