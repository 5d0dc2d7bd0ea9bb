"""Policy server and client on 127.0.0.1: valid, malformed, oversized and unauthenticated requests,
timeouts and a killed server."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time

import msgpack
import numpy as np
import pytest
from vla_rl.real_world import wire
from vla_rl.real_world.action_queue import ActionQueue, AsyncChunker
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
