"""The deployment side's handle on ``vla-rl sim-robot`` over ROS 2: start episodes, read success."""

from __future__ import annotations

from vla_rl.real_world.ros2.dds import Node
from vla_rl.real_world.ros2.nodes import make_node
from vla_rl.real_world.ros2.types import message
from vla_rl.real_world.ros_messages import FLOAT64_MULTI_ARRAY, INT64
from vla_rl.real_world.sim_control import SimStatus, StatusHistory
from vla_rl.real_world.topics import RobotTopics


class Ros2SimControl(StatusHistory):
    """Publishes seeds to ``topics.sim_reset`` and keeps the recent ``topics.sim_status`` messages.

    ``node`` defaults to a ``DdsNode`` on ``domain_id`` with ``dds_config`` (None:
    ``CYCLONEDDS_URI``, as ``Ros2Robot``), or an rclpy node with ``backend='rclpy'``.
    """

    def __init__(
        self,
        topics: RobotTopics,
        *,
        node: Node | None = None,
        backend: str = "dds",
        domain_id: int = 0,
        dds_config: str | None = None,
    ) -> None:
        super().__init__()
        self.topics = topics
        self._node = node if node is not None else make_node(backend, domain_id, dds_config)
        try:
            self._reset_pub = self._node.publisher(topics.sim_reset, INT64, "reliable")
            on_status = lambda msg: self.add(msg.data)  # noqa: E731
            self._node.subscription(topics.sim_status, FLOAT64_MULTI_ARRAY, on_status, "reliable")
        except BaseException:
            self._node.close()
            raise

    def reset(self, seed: int, timeout_s: float = 10.0) -> SimStatus:
        """Start a new episode from ``seed``; returns the status of its first period."""
        return self.start_episode(
            lambda: self._reset_pub.publish(message(INT64, data=int(seed))),
            lambda: self._reset_pub.subscription_count() > 0,
            timeout_s,
        )

    def close(self) -> None:
        self._node.close()
