"""The deployment side's handle on ``vla-rl sim-robot``: start episodes from seeds, read success."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from vla_rl.real_world.robot import RobotError
from vla_rl.real_world.ros1 import import_rospy
from vla_rl.real_world.sim_control import SimStatus
from vla_rl.real_world.topics import SIM_STATUS_FIELDS, RobotTopics

STAMP_TOLERANCE_S = 1e-6
"""Stamps travel as (sec, nsec) in headers and as float64 in the status: equal within this."""


class Ros1SimControl:
    """Publishes seeds to ``topics.sim_reset`` and keeps the recent ``topics.sim_status`` messages."""

    def __init__(self, topics: RobotTopics) -> None:
        rospy = import_rospy()
        from std_msgs.msg import Float64MultiArray, Int64

        if not rospy.core.is_initialized():
            rospy.init_node("vla_rl_deploy", anonymous=True, disable_signals=True)
        self._int = Int64
        self._cond = threading.Condition()
        self._history: deque[SimStatus] = deque(maxlen=64)
        self._reset_pub = rospy.Publisher(topics.sim_reset, Int64, queue_size=4)
        self._sub = rospy.Subscriber(topics.sim_status, Float64MultiArray, self._on_status, queue_size=16)
        self.topics = topics

    def _on_status(self, msg: Any) -> None:
        status = SimStatus(**dict(zip(SIM_STATUS_FIELDS, msg.data, strict=True)))
        with self._cond:
            self._history.append(status)
            self._cond.notify_all()

    def reset(self, seed: int, timeout_s: float = 10.0) -> SimStatus:
        """Start a new episode from ``seed``; returns the status of its first period."""
        deadline = time.monotonic() + timeout_s
        while self._reset_pub.get_num_connections() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._cond:
            before = self._history[-1].episode if self._history else -1
        self._reset_pub.publish(self._int(int(seed)))
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
        state by a moment: separate connections); None if it does not come within ``timeout_s``."""
        with self._cond:
            found: list[SimStatus] = []

            def arrived() -> bool:
                found[:] = [s for s in self._history if abs(s.stamp_s - stamp_s) < STAMP_TOLERANCE_S]
                return bool(found)

            self._cond.wait_for(arrived, timeout_s)
            return found[0] if found else None

    def close(self) -> None:
        self._sub.unregister()
        self._reset_pub.unregister()
