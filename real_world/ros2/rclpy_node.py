"""The same small node interface as ``DdsNode``, over rclpy, for machines with ROS 2 installed.

Messages stay rosbags objects: they cross into rclpy as serialized CDR (``publish`` of bytes and
``raw=True`` subscriptions), so no per-message field copying between the two type systems is
needed and both backends accept and return exactly the same objects. rclpy is imported only when a
node is made.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from vla_rl.real_world.ros2.dds import LatestCache, MessageCallback, qos_depth_reliable
from vla_rl.real_world.ros2.types import typestore


def import_rclpy() -> Any:
    """rclpy, or an ImportError that says how to get it (or to use the cyclonedds backend)."""
    try:
        import rclpy
    except ImportError as error:
        raise ImportError(
            "rclpy is not importable: source a ROS 2 installation (e.g. /opt/ros/humble/setup.bash) "
            "or use the cyclonedds backend (DdsNode), which needs no ROS 2"
        ) from error
    return rclpy


def rclpy_qos(name: str) -> Any:
    """The rclpy QoSProfile of one of ``dds.QOS_PROFILES``."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    depth, reliable = qos_depth_reliable(name)
    return QoSProfile(
        depth=depth,
        history=HistoryPolicy.KEEP_LAST,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE,
    )


def _message_class(msgtype: str) -> type:
    from rosidl_runtime_py.utilities import get_message

    return get_message(msgtype)


class RclpyPublisher:
    def __init__(self, publisher: Any, msgtype: str) -> None:
        self._publisher = publisher
        self._msgtype = msgtype

    def publish(self, msg: Any) -> None:
        self._publisher.publish(bytes(typestore().serialize_cdr(msg, self._msgtype)))

    def subscription_count(self) -> int:
        return int(self._publisher.get_subscription_count())


class RclpySubscription(LatestCache):
    def __init__(self, msgtype: str, callback: MessageCallback | None) -> None:
        super().__init__(callback)
        self._msgtype = msgtype
        self.handle: Any = None

    def on_raw(self, data: bytes) -> None:
        self.put(typestore().deserialize_cdr(data, self._msgtype))


class RclpyNode:
    """An rclpy node in its own context, spun by a background executor thread."""

    def __init__(self, node_name: str = "vla_rl", domain_id: int = 0) -> None:
        rclpy = import_rclpy()
        from rclpy.executors import SingleThreadedExecutor

        self._context = rclpy.Context()
        rclpy.init(context=self._context, domain_id=domain_id)
        self._node = rclpy.create_node(node_name, context=self._context)
        self._executor = SingleThreadedExecutor(context=self._context)
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._spin, name="rclpy-spin", daemon=True)
        self._thread.start()
        self._closed = False

    def _spin(self) -> None:
        with contextlib.suppress(Exception):  # the context was shut down under the executor: closing
            self._executor.spin()

    def publisher(self, topic: str, msgtype: str, qos: str = "reliable") -> RclpyPublisher:
        publisher = self._node.create_publisher(_message_class(msgtype), topic, rclpy_qos(qos))
        return RclpyPublisher(publisher, msgtype)

    def subscription(
        self, topic: str, msgtype: str, callback: MessageCallback | None = None, qos: str = "sensor_data"
    ) -> RclpySubscription:
        sub = RclpySubscription(msgtype, callback)
        sub.handle = self._node.create_subscription(
            _message_class(msgtype), topic, sub.on_raw, rclpy_qos(qos), raw=True
        )
        return sub

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown()
        self._node.destroy_node()
        self._context.try_shutdown()
        self._thread.join(2.0)
