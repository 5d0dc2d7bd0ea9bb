"""A thin ROS 2-compatible node over cyclonedds: publishers and subscriptions of rosbags messages.

Topics are ROS names (``/joint_states``, published as the DDS topic ``rt/joint_states``), message
types ROS names (``sensor_msgs/msg/JointState``) and messages rosbags message objects, so the same
code runs over this node or over rclpy (``rclpy_node.RclpyNode``) where ROS 2 is installed.

QoS profiles follow ROS 2's (``rmw_qos_profile_default`` and ``rmw_qos_profile_sensor_data``):

================  ============  ========  ===============
name              reliability   history   durability
================  ============  ========  ===============
``reliable``      RELIABLE      LAST 10   VOLATILE
``sensor_data``   BEST_EFFORT   LAST 5    VOLATILE
================  ============  ========  ===============

(``best_effort`` is another name for ``sensor_data``.) A reader matches a writer only if the writer
offers at least the reader's reliability: a reliable subscription does NOT match a best-effort
publisher (camera drivers usually publish best-effort), while a best-effort subscription matches
both. Subscriptions therefore default to ``sensor_data`` and publishers to ``reliable``, which
every subscriber matches.

Writers offer XCDR1 only (what ROS 2 sends and expects); readers accept XCDR1 and XCDR2.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from cyclonedds.core import (
    GuardCondition,
    InstanceState,
    Policy,
    Qos,
    ReadCondition,
    SampleState,
    ViewState,
    WaitSet,
)
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration
from vla_rl.real_world.ros2.types import IdlTypes, dds_topic_name, idl_types

QOS_PROFILES = ("reliable", "sensor_data", "best_effort")

MessageCallback = Callable[[Any], None]


def qos_depth_reliable(name: str) -> tuple[int, bool]:
    """(history depth, reliable?) of a QoS profile name."""
    if name == "reliable":
        return 10, True
    if name in ("sensor_data", "best_effort"):
        return 5, False
    raise ValueError(f"unknown QoS profile {name!r}; expected one of {QOS_PROFILES}")


def dds_qos(name: str, *, writer: bool) -> Qos:
    """The cyclonedds QoS of a profile for a writer or a reader."""
    depth, reliable = qos_depth_reliable(name)
    reliability = (
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100))
        if reliable
        else Policy.Reliability.BestEffort
    )
    representation = Policy.DataRepresentation(
        use_cdrv0_representation=True, use_xcdrv2_representation=not writer
    )
    return Qos(reliability, Policy.Durability.Volatile, Policy.History.KeepLast(depth), representation)


def loopback_config(max_participants: int = 20) -> str:
    """A cyclonedds configuration for peers on one host without multicast (e.g. a network namespace).

    Discovery goes by unicast to 127.0.0.1: each participant takes the first free participant
    index (hence port) and probes the ports of indices up to ``max_participants``.
    """
    return (
        "<CycloneDDS><Domain Id='any'>"
        "<General><Interfaces><NetworkInterface name='lo'/></Interfaces>"
        "<AllowMulticast>false</AllowMulticast></General>"
        "<Discovery><Peers><Peer address='127.0.0.1'/></Peers><ParticipantIndex>auto</ParticipantIndex>"
        f"<MaxAutoParticipantIndex>{max_participants}</MaxAutoParticipantIndex></Discovery>"
        "</Domain></CycloneDDS>"
    )


class LatestCache:
    """The latest message of a subscription, how many arrived, and a way to wait for the next one."""

    def __init__(self, callback: MessageCallback | None = None) -> None:
        self._callback = callback
        self._cond = threading.Condition()
        self._latest: Any = None
        self.count = 0
        """Messages received so far."""

    def put(self, msg: Any) -> None:
        with self._cond:
            self._latest = msg
            self.count += 1
            self._cond.notify_all()
        if self._callback is not None:
            self._callback(msg)

    def latest(self) -> Any | None:
        """The newest message, or None before the first."""
        with self._cond:
            return self._latest

    def wait(self, timeout_s: float, after: int = 0) -> Any | None:
        """Wait until more than ``after`` messages have arrived; the newest one, or None on timeout."""
        with self._cond:
            self._cond.wait_for(lambda: self.count > after, timeout=timeout_s)
            return self._latest if self.count > after else None


class Publisher(Protocol):
    def publish(self, msg: Any) -> None: ...

    def subscription_count(self) -> int:
        """How many subscriptions are matched right now."""
        ...


class Subscription(Protocol):
    count: int

    def latest(self) -> Any | None: ...

    def wait(self, timeout_s: float, after: int = 0) -> Any | None: ...


class Node(Protocol):
    """What ``Ros2Robot`` needs from a node; implemented by ``DdsNode`` and ``RclpyNode``."""

    def publisher(self, topic: str, msgtype: str, qos: str = "reliable") -> Publisher: ...

    def subscription(
        self, topic: str, msgtype: str, callback: MessageCallback | None = None, qos: str = "sensor_data"
    ) -> Subscription: ...

    def close(self) -> None: ...


class DdsPublisher:
    """Publishes rosbags messages of one type on one topic."""

    def __init__(self, writer: DataWriter, msgtype: str, types: IdlTypes) -> None:
        self._writer = writer
        self._msgtype = msgtype
        self._types = types

    def publish(self, msg: Any) -> None:
        self._writer.write(self._types.to_idl(msg, self._msgtype))

    def subscription_count(self) -> int:
        return self._writer.get_publication_matched_status().current_count


class DdsSubscription(LatestCache):
    """Takes samples on a background thread into a latest-value cache (and an optional callback).

    A thread with a waitset rather than a cyclonedds listener: listeners run on DDS receive threads,
    where taking the GIL slows DDS down and deleting entities can deadlock.
    """

    def __init__(
        self,
        participant: DomainParticipant,
        reader: DataReader,
        msgtype: str,
        types: IdlTypes,
        stop: GuardCondition,
        callback: MessageCallback | None,
    ) -> None:
        super().__init__(callback)

        self._reader = reader
        self._msgtype = msgtype
        self._types = types
        self._stop = stop
        self._condition = ReadCondition(reader, SampleState.NotRead | ViewState.Any | InstanceState.Any)
        self._waitset = WaitSet(participant)
        self._waitset.attach(self._condition)
        self._waitset.attach(stop)
        self._idl_class = types.idl_class(msgtype)
        self.errors = 0
        """Samples that could not be converted or whose callback raised."""
        self._thread = threading.Thread(target=self._run, name=f"dds-sub-{msgtype}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.read():
            self._waitset.wait(duration(milliseconds=200))
            try:
                samples = self._reader.take(N=64, condition=self._condition)
            except Exception:  # e.g. a sample that does not deserialize
                self.errors += 1
                time.sleep(0.01)
                continue
            for sample in samples:
                if not isinstance(sample, self._idl_class):
                    continue  # dispose/unregister notifications carry no data
                try:
                    self.put(self._types.from_idl(sample, self._msgtype))
                except Exception:  # a bad sample or callback must not kill the subscription
                    self.errors += 1

    def join(self, timeout_s: float = 2.0) -> None:
        self._thread.join(timeout_s)


class DdsNode:
    """One DDS participant with ROS 2-compatible publishers and subscriptions.

    ``config`` is a cyclonedds XML configuration (e.g. ``loopback_config()``); without it
    cyclonedds reads ``CYCLONEDDS_URI`` as usual. Creating a node joins the DDS domain on the
    network: discovery is multicast unless the configuration says otherwise.
    """

    def __init__(self, domain_id: int = 0, config: str | None = None, types: IdlTypes | None = None) -> None:
        self._types = types or idl_types()
        self._domain = Domain(domain_id, config) if config is not None else None
        self._participant = DomainParticipant(domain_id)
        self._stop = GuardCondition(self._participant)
        self._topics: dict[str, tuple[str, Topic]] = {}
        self._entities: list[Any] = []
        self._subscriptions: list[DdsSubscription] = []
        self._closed = False

    @property
    def participant(self) -> DomainParticipant:
        """The cyclonedds participant, for what this thin node does not wrap."""
        return self._participant

    def topic(self, topic: str, msgtype: str) -> Topic:
        """The cyclonedds topic of a ROS topic (made once per name, shared by readers and writers)."""
        name = dds_topic_name(topic)
        if name not in self._topics:
            self._topics[name] = (msgtype, Topic(self._participant, name, self._types.idl_class(msgtype)))
        known, dds_topic = self._topics[name]
        if known != msgtype:
            raise ValueError(f"topic {topic} already carries {known}, not {msgtype}")
        return dds_topic

    def publisher(self, topic: str, msgtype: str, qos: str = "reliable") -> DdsPublisher:
        writer = DataWriter(self._participant, self.topic(topic, msgtype), qos=dds_qos(qos, writer=True))
        self._entities.append(writer)
        return DdsPublisher(writer, msgtype, self._types)

    def subscription(
        self, topic: str, msgtype: str, callback: MessageCallback | None = None, qos: str = "sensor_data"
    ) -> DdsSubscription:
        """Subscribe; ``callback`` (if any) runs on the subscription's thread after the cache update."""
        reader = DataReader(self._participant, self.topic(topic, msgtype), qos=dds_qos(qos, writer=False))
        self._entities.append(reader)
        sub = DdsSubscription(self._participant, reader, msgtype, self._types, self._stop, callback)
        self._subscriptions.append(sub)
        return sub

    def close(self) -> None:
        """Stop the subscription threads and delete the participant; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stop.set(True)
        for sub in self._subscriptions:
            sub.join()
        # Deleting the participant deletes its readers, writers and topics on the DDS side.
        self._participant.__del__()
        self._entities.clear()
        self._topics.clear()
        self._subscriptions.clear()
        self._domain = None

    def __enter__(self) -> DdsNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
