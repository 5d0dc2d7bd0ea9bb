"""The deployment side's handle on ``vla-rl sim-robot`` over ROS 2: start episodes, read success."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from vla_rl.real_world.robot import RobotError
from vla_rl.real_world.ros2.dds import Node, make_node
from vla_rl.real_world.ros2.messages import FLOAT64_MULTI_ARRAY
from vla_rl.real_world.ros2.types import message
from vla_rl.real_world.sim_control import SimStatus
from vla_rl.real_world.topics import SIM_STATUS_FIELDS, RobotTopics

INT64 = "std_msgs/msg/Int64"

STAMP_TOLERANCE_S = 1e-6
"""The status carries the joint state's stamp as float64; ``Ros2SimNode`` stamps whole nanoseconds,
so they are equal, but a node stamping finer times would differ by up to this after (sec, nanosec)."""


class Ros2SimControl:
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
        self.topics = topics
        self._cond = threading.Condition()
        self._history: deque[SimStatus] = deque(maxlen=64)
        self._node = node if node is not None else make_node(backend, domain_id, dds_config)
        try:
            self._reset_pub = self._node.publisher(topics.sim_reset, INT64, "reliable")
            self._node.subscription(topics.sim_status, FLOAT64_MULTI_ARRAY, self._on_status, "reliable")
        except BaseException:
            self._node.close()
            raise

    def _on_status(self, msg: Any) -> None:
        status = SimStatus(**dict(zip(SIM_STATUS_FIELDS, map(float, msg.data), strict=True)))
        with self._cond:
            self._history.append(status)
            self._cond.notify_all()

    def reset(self, seed: int, timeout_s: float = 10.0) -> SimStatus:
        """Start a new episode from ``seed``; returns the status of its first period."""
        deadline = time.monotonic() + timeout_s
        # A seed published before the node's subscription matches is lost; a status tells which
        # episode runs now (the node publishes one every period).
        while self._reset_pub.subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._cond:
            self._cond.wait_for(lambda: bool(self._history), max(0.0, deadline - time.monotonic()))
            before = self._history[-1].episode if self._history else -1
        self._reset_pub.publish(message(INT64, data=int(seed)))
        with self._cond:
            ok = self._cond.wait_for(
                lambda: (
                    bool(self._history) and self._history[-1].episode > before and self._history[-1].step == 0
                ),
                max(0.0, deadline - time.monotonic()),
            )
            if not ok:
                raise RobotError(f"the simulated robot did not start an episode within {timeout_s} s")
            return self._history[-1]

    def status_at(self, stamp_s: float, timeout_s: float) -> SimStatus | None:
        """The status published with the joint state stamped ``stamp_s`` (it may trail the joint
        state by a moment: one DDS writer per topic); None if it does not come within ``timeout_s``."""
        with self._cond:
            found: list[SimStatus] = []

            def arrived() -> bool:
                found[:] = [s for s in self._history if abs(s.stamp_s - stamp_s) < STAMP_TOLERANCE_S]
                return bool(found)

            self._cond.wait_for(arrived, timeout_s)
            return found[0] if found else None

    def close(self) -> None:
        self._node.close()
