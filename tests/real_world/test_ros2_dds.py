"""ROS 2 over cyclonedds without ROS 2: CDR compatibility with rosbags, QoS, two-process pub/sub.

The in-process tests create no DDS participant. Everything that does runs in ``ros2_peer.py``
processes inside a private network namespace made here with ``unshare -n`` (only ``lo``, brought
up), so no discovery traffic leaves the machine's namespace.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip("cyclonedds", reason="cyclonedds (Python binding) is not installed")
pytest.importorskip("rosbags", reason="rosbags is not installed")

from namespaces import private_namespace_unavailable, run_in_namespace  # noqa: E402
from ros2_peer import sample_messages  # noqa: E402
from rosbags.interfaces import Nodetype  # noqa: E402
from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # noqa: E402
from rosbags.typesys.store import Typestore  # noqa: E402
from vla_rl.real_world.ros2.dds import dds_qos  # noqa: E402
from vla_rl.real_world.ros2.types import (  # noqa: E402
    IdlTypes,
    dds_topic_name,
    dds_typename,
    idl_types,
    ros_topic_name,
    typestore,
)

PEER = Path(__file__).with_name("ros2_peer.py")
NAMED = [
    "sensor_msgs/msg/JointState",
    "sensor_msgs/msg/Image",
    "sensor_msgs/msg/CompressedImage",
    "trajectory_msgs/msg/JointTrajectory",
    "std_msgs/msg/Float64MultiArray",
    "std_msgs/msg/Bool",
    "geometry_msgs/msg/PoseStamped",
]
_DTYPES = {"bool": np.bool_, "char": np.uint8, "byte": np.int8, "octet": np.int8}  # as rosbags reads them


# ------------------------------------------------------------------------------ helpers
def random_message(store: Typestore, msgtype: str, rng: np.random.Generator) -> Any:
    """A rosbags message with random contents (sequences of 0-3 items) from the field definitions."""
    fields = {name: _random_value(store, desc, rng) for name, desc in store.get_msgdef(msgtype).fields}
    return store.types[msgtype](**fields)


def _random_scalar(base: str, bound: int, rng: np.random.Generator) -> Any:
    if base == "string":
        return "".join(rng.choice(list("abcxyz_/ "), size=int(rng.integers(0, (bound or 6) + 1))))
    if base == "bool":
        return bool(rng.integers(2))
    if base == "byte":  # rosbags keeps a scalar ROS byte as a signed 8-bit value
        return int(rng.integers(-128, 127, endpoint=True))
    dtype = np.dtype(_DTYPES.get(base, base))
    if dtype.kind == "f":  # float32 values survive float32 storage exactly
        return float(dtype.type(rng.normal() * 100))
    info = np.iinfo(dtype)
    return int(rng.integers(info.min, info.max, endpoint=True, dtype=dtype))


def _random_value(store: Typestore, desc: tuple[Any, Any], rng: np.random.Generator) -> Any:
    kind, detail = desc
    if kind == Nodetype.BASE:
        return _random_scalar(*detail, rng)
    if kind == Nodetype.NAME:
        return random_message(store, detail, rng)
    sub, size = detail
    count = size if kind == Nodetype.ARRAY else int(rng.integers(0, min(size or 3, 3) + 1))
    if sub[0] == Nodetype.BASE and sub[1][0] != "string":
        dtype = np.dtype(_DTYPES.get(sub[1][0], sub[1][0]))
        return np.array([_random_scalar(sub[1][0], 0, rng) for _ in range(count)], dtype=dtype)
    return [_random_value(store, sub, rng) for _ in range(count)]


def assert_same(a: Any, b: Any, path: str = "msg") -> None:
    """Field-by-field equality of two rosbags messages (numpy arrays: same dtype and values)."""
    if hasattr(a, "__msgtype__"):
        assert a.__msgtype__ == b.__msgtype__, path
        for name in a.__dataclass_fields__:
            if name != "__msgtype__":
                assert_same(getattr(a, name), getattr(b, name), f"{path}.{name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, f"{path}: {a!r} vs {b!r}"
        assert np.array_equal(a, b), path
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} vs {b!r}"


def check_cdr_compatible(types: IdlTypes, msg: Any, msgtype: str) -> bytes:
    """cyclonedds' CDR of ``msg`` equals rosbags' byte for byte, and both read back to ``msg``.

    ``IdlStruct.serialize()`` includes the 4-byte encapsulation header (00 01 00 00: XCDR1,
    little-endian) just like ``Typestore.serialize_cdr``, so whole buffers are compared.
    """
    ours = types.serialize(msg, msgtype)
    theirs = bytes(types.store.serialize_cdr(msg, msgtype))
    assert ours[:4] == b"\x00\x01\x00\x00"
    assert ours == theirs, msgtype
    assert_same(msg, types.deserialize(ours, msgtype))
    assert_same(msg, types.store.deserialize_cdr(ours, msgtype))
    return ours


# ------------------------------------------------------------------------------ in-process: types
def test_ros2_dds_names() -> None:
    assert dds_typename("sensor_msgs/msg/JointState") == "sensor_msgs::msg::dds_::JointState_"
    assert idl_types().idl_class("std_msgs/msg/Header").__idl_typename__ == "std_msgs::msg::dds_::Header_"
    assert dds_topic_name("/joint_states") == "rt/joint_states"
    assert dds_topic_name("camera/front/image_raw") == "rt/camera/front/image_raw"
    assert ros_topic_name("rt/joint_states") == "/joint_states"
    with pytest.raises(ValueError):
        dds_topic_name("/bad//name")


def test_sample_messages_cdr_matches_rosbags() -> None:
    """The JointState, 64x64 rgb8 Image and JointTrajectory that the pub/sub test sends."""
    for _, msgtype, _, msg in sample_messages().values():
        check_cdr_compatible(idl_types(), msg, msgtype)
    image = sample_messages()["image"][3]
    cls = idl_types().idl_class("sensor_msgs/msg/Image")
    assert isinstance(idl_types().to_idl(image).data, bytes)  # no Python int per pixel byte
    assert isinstance(cls.deserialize(idl_types().serialize(image)).data, bytes)


@pytest.mark.parametrize("msgtype", NAMED)
def test_named_messages_cdr_matches_rosbags(msgtype: str) -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        check_cdr_compatible(idl_types(), random_message(typestore(), msgtype, rng), msgtype)


def test_every_humble_message_cdr_matches_rosbags() -> None:
    """All message types rosbags knows for Humble: bounded strings and sequences, fixed arrays, ..."""
    store, rng = typestore(), np.random.default_rng(1)
    for msgtype in store.fielddefs:
        check_cdr_compatible(idl_types(), random_message(store, msgtype, rng), msgtype)


def test_bounds_and_unsupported_types() -> None:
    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg("string<=4 name\nuint8[<=3] small\nfloat32[2] pair", "t/msg/Bounded"))
    types = IdlTypes(store)
    msg = store.types["t/msg/Bounded"](
        name="abcd", small=np.array([1, 2], np.uint8), pair=np.ones(2, np.float32)
    )
    check_cdr_compatible(types, msg, "t/msg/Bounded")
    cls = store.types["t/msg/Bounded"]
    with pytest.raises(Exception, match="member name"):  # cyclonedds enforces the bounds
        types.serialize(cls(name="abcde", small=msg.small, pair=msg.pair))
    with pytest.raises(Exception, match="member small"):
        types.serialize(cls(name="", small=np.zeros(4, np.uint8), pair=msg.pair))

    class WideStore:  # rosbags cannot even register a wstring field: a stand-in store
        def get_msgdef(self, msgtype: str) -> Any:
            return SimpleNamespace(fields=[("text", (Nodetype.BASE, ("wstring", 0)))])

    with pytest.raises(NotImplementedError, match="wstring"):
        IdlTypes(WideStore()).idl_class("t/msg/Wide")  # type: ignore[arg-type]


def test_qos_profiles() -> None:
    reliable, sensor = dds_qos("reliable", writer=True), dds_qos("sensor_data", writer=False)
    assert "Reliable" in repr(reliable) and "KeepLast(depth=10)" in repr(reliable)
    assert "BestEffort" in repr(sensor) and "KeepLast(depth=5)" in repr(sensor)
    assert "Volatile" in repr(reliable) and "Volatile" in repr(sensor)
    with pytest.raises(ValueError):
        dds_qos("transient", writer=True)


def test_rclpy_backend_reports_missing_rclpy() -> None:
    from vla_rl.real_world.ros2.rclpy_node import import_rclpy

    try:
        import rclpy  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="cyclonedds backend"):
            import_rclpy()
    else:
        pytest.skip("rclpy is installed: nothing missing to report")


def test_rclpy_qos_profiles() -> None:
    pytest.importorskip(
        "rclpy", reason="rclpy (ROS 2) is not installed here; the cyclonedds backend is tested"
    )
    from rclpy.qos import ReliabilityPolicy
    from vla_rl.real_world.ros2.rclpy_node import rclpy_qos

    assert rclpy_qos("reliable").reliability == ReliabilityPolicy.RELIABLE
    assert rclpy_qos("sensor_data").reliability == ReliabilityPolicy.BEST_EFFORT
    assert rclpy_qos("sensor_data").depth == 5


# ------------------------------------------------------------------------------ two processes, one namespace
@pytest.fixture(scope="module")
def peer_in_namespace() -> Any:
    reason = private_namespace_unavailable()
    if reason:
        pytest.skip(reason)

    def run(scenario: str, out: Path) -> dict[str, int]:
        proc = run_in_namespace(f'"{sys.executable}" "{PEER}" {scenario} "{out}"', timeout_s=40)
        logs = "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(out.glob("*.log")))
        assert (out / "codes.json").exists(), f"{proc.stdout}\n{proc.stderr}\n{logs}"
        codes = json.loads((out / "codes.json").read_text())
        assert proc.returncode == 0, f"roles exited {codes}\n{proc.stderr}\n{logs}"
        return codes

    return run


def test_publish_subscribe_across_processes(peer_in_namespace: Any, tmp_path: Path) -> None:
    """What arrives is byte for byte rosbags' CDR of what was sent, and QoS matching is ROS 2's."""
    peer_in_namespace("pubsub", tmp_path)
    received = json.loads((tmp_path / "sub.json").read_text())
    published = json.loads((tmp_path / "pub.json").read_text())
    store = typestore()
    assert received["ok"] and set(received["messages"]) == set(sample_messages())
    for name, (_, msgtype, _, sent) in sample_messages().items():
        expected = bytes(store.serialize_cdr(sent, msgtype))
        got = {key: bytes.fromhex(value) for key, value in received["messages"][name].items()}
        # cyclonedds' C layer pads a sample to a multiple of 4 bytes on the wire (as ROS 2 with
        # rmw_cyclonedds does); rosbags reads the padded form as well.
        assert got["raw_cdr"] == expected + b"\0" * (-len(expected) % 4), name
        assert_same(sent, store.deserialize_cdr(got["raw_cdr"], msgtype))
        assert got["rosbags_cdr"] == expected, name  # the received message, re-serialised by rosbags
        assert got["idl_cdr"] == expected, name
    # A reliable subscription never matches a best-effort publisher; best-effort ones match both:
    # each writer was matched by exactly the subscriber's default (best-effort) subscription and
    # its raw reader, the JointState writer (best-effort) not by the extra reliable subscription.
    assert received["reliable_on_best_effort"] == 0
    assert published["max_subscription_counts"] == dict.fromkeys(sample_messages(), 2)


def test_ros2_robot_against_a_driver_process(peer_in_namespace: Any, tmp_path: Path) -> None:
    peer_in_namespace("robot_and_driver", tmp_path)
    robot = json.loads((tmp_path / "robot.json").read_text())
    driver = json.loads((tmp_path / "driver.json").read_text())
    assert "no joint state" in robot["timeout_error"]
    np.testing.assert_allclose(robot["qpos"], np.linspace(-1.0, 1.0, 7))
    assert robot["gripper_opening_m"] == pytest.approx(0.04)
    assert robot["image_equal"] and robot["task_state"] == [1.0, 2.0, 3.0]
    target = np.linspace(-1.0, 1.0, 7) + 0.1
    single, chunk = driver["trajectories"][:2]
    np.testing.assert_allclose(single, [target])
    np.testing.assert_allclose(chunk, [target + 0.01 * i for i in range(3)])
    assert driver["gripper"] == [0.04]
