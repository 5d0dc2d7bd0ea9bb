"""Wire format, policy server/client and the robot-side action queue (all on 127.0.0.1)."""

from __future__ import annotations

import math
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time

import msgpack
import numpy as np
import pytest
from vla_rl.real_world import wire
from vla_rl.real_world.action_queue import MERGE_MODES, ActionQueue, AsyncChunker
from vla_rl.real_world.policy_client import ChunkReply, PolicyClient, PolicyServerError
from vla_rl.real_world.policy_server import PolicyServer, is_loopback_host

CHUNK = 4
TOKEN = "s3cret-token"


def small_policy(observation: dict) -> np.ndarray:
    """Row t of the chunk is state * (t + 1); optional sleep / failure for the error tests."""
    if observation.get("sleep_s"):
        time.sleep(observation["sleep_s"])
    if observation.get("explode"):
        raise RuntimeError("policy blew up")
    state = np.asarray(observation["state"], dtype=np.float32)
    return np.arange(1, CHUNK + 1, dtype=np.float32)[:, None] * state[None, :]


@pytest.fixture
def server():
    with PolicyServer(small_policy, policy_version="v7", max_request_bytes=4096) as srv:
        yield srv


@pytest.fixture
def token_server():
    with PolicyServer(small_policy, token=TOKEN, max_request_bytes=4096) as srv:
        yield srv


def raw_call(address, payload: bytes) -> dict:
    """Send one hand-made frame and return the decoded reply."""
    with socket.create_connection(address, timeout=2.0) as sock:
        wire.send_frame(sock, payload)
        return wire.decode(wire.recv_frame(sock, 1 << 20))


def assert_still_serves(srv: PolicyServer, token: str | None = None) -> None:
    with PolicyClient(*srv.address, token=token, timeout_s=2.0) as client:
        reply = client.infer({"state": np.array([1.0, -2.0], dtype=np.float32)})
    np.testing.assert_allclose(reply.actions[:, 0], [1, 2, 3, 4])
    np.testing.assert_allclose(reply.actions[:, 1], [-2, -4, -6, -8])


# ---------------------------------------------------------------------------------------------
# wire


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


# ---------------------------------------------------------------------------------------------
# server and client


def test_valid_request_gets_the_policy_chunk(server):
    with PolicyClient(*server.address, timeout_s=2.0) as client:
        assert client.ping() >= 0
        reply = client.infer({"state": np.array([0.5, 2.0, -1.0], dtype=np.float32), "task": "push"})
        second = client.infer({"state": np.ones(3, dtype=np.float32)})
    assert isinstance(reply, ChunkReply)
    assert reply.actions.dtype == np.float32 and reply.actions.shape == (CHUNK, 3)
    np.testing.assert_allclose(reply.actions[2], [1.5, 6.0, -3.0])
    assert reply.policy_version == "v7" and reply.request_id == 1 and second.request_id == 2
    assert 0 <= reply.inference_s <= reply.round_trip_s and reply.server_time_s > 0
    stats = server.stats
    assert stats["chunks"] == 2 and stats["pings"] == 1 and stats["requests"] == 3


def test_bad_requests_are_rejected_and_server_keeps_serving(server):
    addr = server.address
    cases = [
        (b"\xc1\xc1\xc1", "bad_request"),
        (msgpack.packb([1, 2, 3]), "bad_request"),
        (wire.encode({"type": "infer", "request_id": 3}), "bad_request"),  # no observation
        (wire.encode({"type": "infer", "observation": {}}), "bad_request"),  # no request_id
        (wire.encode({"type": "infer", "request_id": 4, "observation": [1]}), "bad_request"),
        (wire.encode({"type": "launch_missiles"}), "bad_request"),
        (wire.encode({"type": "infer", "request_id": 5, "observation": {"explode": True}}), "internal"),
        (wire.encode({"type": "infer", "request_id": 6, "observation": {"no_state": 1}}), "internal"),
    ]
    for payload, code in cases:
        reply = raw_call(addr, payload)
        assert reply["type"] == "error" and reply["code"] == code, (payload, reply)
        assert reply["message"]
        assert_still_serves(server)
    assert raw_call(addr, cases[2][0])["request_id"] == 3
    # The oversized frame is answered, then the connection is closed (the stream cannot resync).
    with socket.create_connection(addr, timeout=2.0) as sock:
        sock.sendall((server.max_request_bytes + 1).to_bytes(4, "big") + b"x" * 64)
        reply = wire.decode(wire.recv_frame(sock, 1 << 20))
        assert reply["code"] == "too_large"
        with pytest.raises((wire.StreamClosedError, ConnectionResetError)):
            wire.recv_frame(sock, 1 << 20)
    assert_still_serves(server)
    # A big but valid-looking observation through the client gets the same answer.
    with PolicyClient(*addr, timeout_s=2.0) as client, pytest.raises(PolicyServerError) as info:
        client.infer({"state": np.zeros(10_000, dtype=np.float32)})
    assert info.value.code == "too_large"
    rejections = server.stats["rejections"]
    assert rejections == {"bad_request": 7, "too_large": 2, "unauthorized": 0, "internal": 2}


def test_internal_error_through_client_then_recovers(server):
    with PolicyClient(*server.address, timeout_s=2.0) as client:
        with pytest.raises(PolicyServerError, match="policy blew up") as info:
            client.infer({"explode": True})
        assert info.value.code == "internal"
        assert client.infer({"state": np.ones(2, dtype=np.float32)}).actions.shape == (CHUNK, 2)


def test_token_is_required_and_checked(token_server):
    addr = token_server.address
    for token in (None, "wrong", "s3cret-token-but-longer", ""):
        with (
            PolicyClient(*addr, token=token, timeout_s=2.0) as client,
            pytest.raises(PolicyServerError) as info,
        ):
            client.infer({"state": np.ones(2, dtype=np.float32)})
        assert info.value.code == "unauthorized"
    reply = raw_call(addr, wire.encode({"type": "ping", "token": 123}))
    assert reply["code"] == "unauthorized"
    assert_still_serves(token_server, token=TOKEN)
    assert token_server.stats["rejections"]["unauthorized"] == 5


def test_non_loopback_host_requires_a_token():
    for host in ("0.0.0.0", "192.168.1.20", "robot-gpu.lan", "::"):
        with pytest.raises(ValueError, match="without a token"):
            PolicyServer(small_policy, host=host)
    PolicyServer(small_policy, host="0.0.0.0", token=TOKEN)  # constructed, never bound
    assert is_loopback_host("127.0.0.1") and is_loopback_host("127.3.2.1") and is_loopback_host("::1")
    assert is_loopback_host("localhost") and not is_loopback_host("")


def test_connections_beyond_the_limit_are_closed():
    with PolicyServer(small_policy, max_connections=1) as srv:
        first = PolicyClient(*srv.address, timeout_s=2.0)
        first.ping()  # holds the only slot
        with PolicyClient(*srv.address, timeout_s=2.0) as second, pytest.raises(PolicyServerError) as info:
            second.ping()
        assert info.value.code == "connection" and srv.stats["refused_connections"] == 1
        first.close()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:  # the slot frees once the server notices the close
            try:
                assert_still_serves(srv)
                break
            except PolicyServerError:
                time.sleep(0.02)
        else:
            pytest.fail("the freed connection slot was not reused")


def test_client_times_out_then_reconnects(server):
    client = PolicyClient(*server.address, timeout_s=0.2)
    t0 = time.perf_counter()
    with pytest.raises(PolicyServerError) as info:
        client.infer({"state": np.ones(2, dtype=np.float32), "sleep_s": 0.6})
    assert info.value.code == "timeout" and time.perf_counter() - t0 < 0.5
    client.timeout_s = 3.0  # the slow call still holds the policy lock for a moment
    reply = client.infer({"state": np.ones(2, dtype=np.float32)})
    assert reply.request_id == 2 and reply.actions.shape == (CHUNK, 2)
    client.close()


def test_stopped_server_makes_client_raise_and_chunker_report():
    srv = PolicyServer(small_policy).start()
    client = PolicyClient(*srv.address, timeout_s=0.5)
    assert client.infer({"state": np.ones(2, dtype=np.float32)}).actions.shape == (CHUNK, 2)
    srv.stop()
    for _ in range(2):  # the open connection is gone, then reconnecting is refused
        with pytest.raises(PolicyServerError) as info:
            client.infer({"state": np.ones(2, dtype=np.float32)})
        assert info.value.code == "connection"
    client.close()


SUBPROCESS_SERVER = """
import numpy as np
from vla_rl.real_world.policy_server import PolicyServer
srv = PolicyServer(lambda obs: np.tile(np.asarray(obs["state"], np.float32), (6, 1)))
srv.serve_forever(ready=lambda address: print(address[1], flush=True))
"""


def test_sigkilled_server_process_queue_runs_dry():
    proc = subprocess.Popen(
        [sys.executable, "-c", SUBPROCESS_SERVER], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 15.0)
        assert ready, "server subprocess did not start"
        port = int(proc.stdout.readline())
        client = PolicyClient("127.0.0.1", port, timeout_s=0.5)
        queue = ActionQueue(merge="latest")
        chunker = AsyncChunker(client.infer, queue, refill_threshold=2, retry_interval_s=0.01)
        obs = {"state": np.array([1.0, 2.0], dtype=np.float32)}
        assert chunker.observe(obs, 0) and chunker.wait_idle(5.0)
        assert chunker.successes == 1 and queue.remaining(0) == 5
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=5.0)
        actions = []
        for step in range(10):  # control loop at "step" granularity; requests fail in the background
            chunker.observe(obs, step)
            chunker.wait_idle(5.0)
            actions.append(queue.pop(step))
        assert all(a is not None for a in actions[:6]) and actions[6:] == [None] * 4  # hold
        np.testing.assert_allclose(actions[3], [1.0, 2.0])
        assert chunker.failures >= 1 and chunker.consecutive_failures == chunker.failures
        assert isinstance(chunker.last_error, PolicyServerError) and chunker.last_error.code == "connection"
        chunker.close()
        client.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=5.0)


# ---------------------------------------------------------------------------------------------
# action queue


def chunk(base: float, marker: float, n: int = 4) -> np.ndarray:
    """Rows [base + i, marker]: the first column tells which row, the second which chunk."""
    return np.array([[base + i, marker] for i in range(n)], dtype=np.float32)


def test_latest_merge_and_remaining():
    q = ActionQueue(merge="latest")
    assert q.pop(0) is None and q.remaining(0) == 0
    q.put(chunk(10, 0), start_step=0)  # steps 0..3
    assert q.remaining(0) == 3 and q.remaining(3) == 0
    np.testing.assert_array_equal(q.pop(0), [10, 0])
    np.testing.assert_array_equal(q.pop(1), [11, 0])
    q.put(chunk(20, 1), start_step=2)  # steps 2..5, newer than the first
    assert q.remaining(2) == 3
    np.testing.assert_array_equal(q.pop(2), [20, 1])  # switched to the newest plan
    np.testing.assert_array_equal(q.pop(3), [21, 1])
    np.testing.assert_array_equal(q.pop(5), [23, 1])
    assert q.pop(6) is None and len(q) == 0


def test_latest_means_latest_start_step_not_arrival_order():
    q = ActionQueue(merge="latest")
    q.put(chunk(20, 1), start_step=2)
    q.put(chunk(10, 0), start_step=0)  # a stale plan arriving late does not take over
    np.testing.assert_array_equal(q.pop(1), [11, 0])
    np.testing.assert_array_equal(q.pop(2), [20, 1])


def test_ensemble_merge_by_hand():
    # decay = ln 3 so the weights are 1, 1/3, 1/9 from the OLDEST covering chunk on.
    q = ActionQueue(merge="ensemble", ensemble_decay=math.log(3.0))
    q.put(chunk(10, 0), start_step=0)  # A: steps 0..3
    q.put(chunk(20, 1), start_step=2)  # B: steps 2..5
    np.testing.assert_allclose(q.pop(1), [11, 0])  # only A
    # step 2: A2 = [12, 0] (w 3/4), B0 = [20, 1] (w 1/4) -> [9 + 5, 0.25]
    np.testing.assert_allclose(q.pop(2), [14.0, 0.25], rtol=1e-6)
    q.put(chunk(30, 2), start_step=3)  # C: steps 3..6
    # step 3: A3 = 13, B1 = 21, C0 = 30 with weights 9/13, 3/13, 1/13 -> 210/13; marker 5/13
    np.testing.assert_allclose(q.pop(3), [210 / 13, 5 / 13], rtol=1e-6)
    # step 4 (A is used up): B2 = 22 (w 3/4), C1 = 31 (w 1/4) -> 16.5 + 7.75 = 24.25; marker 1.25
    np.testing.assert_allclose(q.pop(4), [24.25, 1.25], rtol=1e-6)
    uniform = ActionQueue(merge="ensemble", ensemble_decay=0.0)
    uniform.put(chunk(10, 0), 0)
    uniform.put(chunk(20, 1), 2)
    np.testing.assert_allclose(uniform.pop(2), [16.0, 0.5])
    assert set(MERGE_MODES) == {"latest", "ensemble"}
    with pytest.raises(ValueError, match="unknown merge mode"):
        ActionQueue(merge="median")


def test_start_step_alignment_and_validation():
    q = ActionQueue()
    q.put(chunk(50, 0), start_step=5)  # row i applies at step 5 + i
    assert q.pop(4) is None
    np.testing.assert_array_equal(q.pop(7), [52, 0])  # rows for steps 5, 6 are skipped
    assert q.remaining(7) == 1
    with pytest.raises(ValueError):
        q.put(np.zeros((3, 5)), start_step=8)  # action_dim changed
    with pytest.raises(ValueError):
        q.put(np.zeros(3), start_step=8)


def test_async_chunker_skips_the_part_of_the_chunk_already_in_the_past():
    release = threading.Event()
    calls = []

    def slow_infer(observation):
        s = int(observation["step"])
        calls.append(s)
        release.wait(5.0)
        return ChunkReply(np.arange(s, s + 8, dtype=np.float32)[:, None], len(calls), None, 0.0, 0.0, 0.0)

    q = ActionQueue()
    with AsyncChunker(slow_infer, q, refill_threshold=3) as chunker:
        obs = {"step": np.array(0)}
        assert chunker.observe(obs, 0)
        obs["step"][...] = 99  # the chunker took a snapshot: the robot may reuse its buffers
        for step in range(1, 4):  # the robot holds while the first reply is late
            assert not chunker.observe({"step": step}, step) and not chunker.request({"step": step}, step)
            assert q.pop(step) is None
        release.set()
        assert chunker.wait_idle(5.0) and calls == [0]
        np.testing.assert_array_equal(q.pop(4), [4.0])  # rows 0..3 were in the past
        for step in range(5, 40):  # refills keep the queue from running dry
            chunker.observe({"step": step}, step)
            chunker.wait_idle(5.0)
            np.testing.assert_array_equal(q.pop(step), [float(step)])
            assert q.remaining(step) >= 3
        assert chunker.failures == 0 and chunker.successes == len(calls) > 1
