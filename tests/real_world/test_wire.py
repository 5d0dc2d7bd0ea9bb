"""The policy server's wire format: msgpack with raw array bytes, its limits and its framing."""

from __future__ import annotations

import math
import socket
import time

import msgpack
import numpy as np
import pytest
from vla_rl.real_world import wire

CHUNK = 4
TOKEN = "s3cret-token"


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (5,), (2, 3, 4)])
def test_array_round_trip_every_dtype_and_shape(dtype, shape):
    rng = np.random.default_rng(0)
    arr = np.asarray(rng.standard_normal(shape) * 50).astype(dtype)
    out = wire.decode(wire.encode({"a": arr}))["a"]
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dtype) and out.shape == shape
    np.testing.assert_array_equal(out, arr)
    assert out.flags.writeable and out.flags.c_contiguous


def test_round_trip_all_value_types():
    message = {
        "s": "héllo",
        "i": -(2**63),
        "big": 2**63 - 1,
        "f": 1.5,
        "nan": float("nan"),
        "t": True,
        "none": None,
        "list": [1, "two", [3.0, False], {"k": np.arange(3, dtype=np.int32)}],
        "nested": {"a": {"b": {"c": np.zeros((2, 2), dtype=np.float64)}}},
        "transposed": np.arange(6, dtype=np.float32).reshape(2, 3).T,  # not C-contiguous
        "big_endian": np.arange(3, dtype=">i4"),
        "np_scalar": np.float32(2.5),
    }
    out = wire.decode(wire.encode(message))
    assert out["s"] == "héllo" and out["i"] == -(2**63) and out["big"] == 2**63 - 1
    assert out["f"] == 1.5 and math.isnan(out["nan"]) and out["t"] is True and out["none"] is None
    assert out["list"][:3] == [1, "two", [3.0, False]]
    np.testing.assert_array_equal(out["list"][3]["k"], [0, 1, 2])
    assert out["nested"]["a"]["b"]["c"].shape == (2, 2)
    np.testing.assert_array_equal(out["transposed"], message["transposed"])
    np.testing.assert_array_equal(out["big_endian"], [0, 1, 2])
    assert out["np_scalar"] == 2.5
    assert issubclass(wire.WireError, ValueError)


@pytest.mark.parametrize(
    "value",
    [
        np.array([1, "x"], dtype=object),
        np.zeros(2, dtype=np.complex64),
        np.zeros(2, dtype=np.float16),
        b"raw",
    ],
)
def test_encode_rejects_disallowed_values(value):
    with pytest.raises(wire.WireError):
        wire.encode({"x": value})
    with pytest.raises(wire.WireError, match="keys must be str"):
        wire.encode({1: 2})


def _ext_array(name, shape, raw: bytes) -> bytes:
    inner = msgpack.packb([name, shape, raw], use_bin_type=True)
    return msgpack.packb({"a": msgpack.ExtType(wire.ARRAY_EXT_CODE, inner)}, use_bin_type=True)


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (_ext_array("object", [1], b"\0" * 8), "not allowed"),
        (_ext_array("complex64", [1], b"\0" * 8), "not allowed"),
        (_ext_array("float32", [2, 3], b"\0" * 23), "needs 24 bytes, got 23"),
        (_ext_array("float32", [-1], b""), "non-negative"),
        (_ext_array("float32", [2**40, 2**40], b""), "needs"),
        (msgpack.packb({"a": msgpack.ExtType(7, b"")}), "extension type 7"),
        (msgpack.packb({1: "int key"}), "malformed"),  # strict_map_key
        (msgpack.packb({"b": b"bytes"}, use_bin_type=True), "bytes is not allowed"),
        (msgpack.packb([1, 2]), "must be a map"),
        (b"\xc1", "malformed"),  # a byte msgpack never uses
        (msgpack.packb({"a": "x" * 10})[:-3], "malformed"),  # truncated
        (b"\x91" * 100_000 + b"\xc0", "malformed|nesting"),  # far beyond msgpack's own stack
    ],
)
def test_decode_rejects_bad_payloads(payload, match):
    with pytest.raises(wire.WireError, match=match):
        wire.decode(payload)


def test_decode_limits_size_and_depth():
    payload = wire.encode({"x": np.zeros(100, dtype=np.float64)})
    with pytest.raises(wire.WireError, match="exceeds the limit"):
        wire.decode(payload, max_bytes=len(payload) - 1)
    assert wire.decode(payload, max_bytes=len(payload))["x"].shape == (100,)
    deep: object = 0
    for _ in range(10):
        deep = [deep]
    payload = msgpack.packb({"d": deep})
    assert wire.decode(payload, max_depth=11)["d"] is not None
    with pytest.raises(wire.WireError, match="nesting"):
        wire.decode(payload, max_depth=10)


def test_framing_checks_length_before_reading_payload():
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(1.0)
        wire.send_frame(a, b"hello")
        wire.send_frame(a, b"")
        assert wire.recv_frame(b, 5) == b"hello"
        assert wire.recv_frame(b, 5) == b""
        a.sendall((1 << 30).to_bytes(4, "big"))  # announces 1 GiB, sends nothing after it
        t0 = time.perf_counter()
        with pytest.raises(wire.FrameTooLargeError) as info:
            wire.recv_frame(b, 1024)
        assert info.value.size == 1 << 30 and time.perf_counter() - t0 < 0.5
        a.sendall(b"\x00\x00\x00\x09abc")  # frame cut short by the peer
        a.close()
        with pytest.raises(wire.StreamClosedError):
            wire.recv_frame(b, 1024)
