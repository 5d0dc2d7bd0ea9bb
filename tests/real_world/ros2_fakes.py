"""A ROS 2 node without DDS for the in-process tests: what ``DdsNode`` offers, minus the network.

Publishers keep what they sent; subscriptions are ``LatestCache`` objects the test feeds (``put``),
and ``preload`` messages arrive as soon as their topic is subscribed. With ``wire=True`` every
message passes through rosbags' CDR as the declared type on the way, so a message of another type
than the publisher or subscription declares fails the test.
"""

from __future__ import annotations

from typing import Any

from vla_rl.real_world.ros2.dds import LatestCache


def cdr_round_trip(msg: Any, msgtype: str) -> Any:
    """``msg`` as rosbags' CDR of ``msgtype`` and read back (what a DDS reader would get)."""
    from vla_rl.real_world.ros2.types import typestore

    assert msg.__msgtype__ == msgtype, f"{msg.__msgtype__} is not {msgtype}"
    return typestore().deserialize_cdr(typestore().serialize_cdr(msg, msgtype), msgtype)


class FakePublisher:
    def __init__(self, msgtype: str, wire: bool = False) -> None:
        self.msgtype, self.wire = msgtype, wire
        self.sent: list[Any] = []
        self.on_publish: Any = None
        """Called with each published message, if set."""

    def publish(self, msg: Any) -> None:
        self.sent.append(cdr_round_trip(msg, self.msgtype) if self.wire else msg)
        if self.on_publish is not None:
            self.on_publish(msg)

    def subscription_count(self) -> int:
        return 1


class FakeNode:
    """The node interface of ``vla_rl.real_world.ros2.dds`` (see the module docstring)."""

    def __init__(self, preload: dict[str, list[Any]] | None = None, wire: bool = False) -> None:
        self.preload = preload or {}
        self.wire = wire
        self.publishers: dict[str, FakePublisher] = {}
        self.subscriptions: dict[str, LatestCache] = {}
        self.types: dict[str, str] = {}
        """Topic -> the message type it was declared with."""
        self.closed = False

    def publisher(self, topic: str, msgtype: str, qos: str = "reliable") -> FakePublisher:
        self.types[topic] = msgtype
        self.publishers[topic] = FakePublisher(msgtype, self.wire)
        return self.publishers[topic]

    def subscription(self, topic: str, msgtype: str, callback: Any = None, qos: str = "sensor_data") -> Any:
        self.types[topic] = msgtype
        self.subscriptions[topic] = LatestCache(callback)
        for msg in self.preload.get(topic, []):
            self.subscriptions[topic].put(cdr_round_trip(msg, msgtype) if self.wire else msg)
        return self.subscriptions[topic]

    def close(self) -> None:
        self.closed = True
