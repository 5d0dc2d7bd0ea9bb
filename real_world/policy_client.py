"""Robot-side client for :class:`vla_rl.real_world.policy_server.PolicyServer`.

One persistent TCP connection, one request at a time. Every failure (timeout, refused or dropped
connection, malformed or error reply) raises :class:`PolicyServerError` and drops the connection, so
the next call starts from a fresh one: a late reply to a timed-out request can never be mistaken for
the answer to a newer request.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
from vla_rl.real_world import wire


class PolicyServerError(RuntimeError):
    """Inference failed. ``code`` is the server's error code (``bad_request``, ``too_large``,
    ``unauthorized``, ``internal``) or a client-side one: ``timeout``, ``connection``, ``protocol``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


@dataclass(frozen=True)
class ChunkReply:
    actions: np.ndarray  # float32 [chunk_len, action_dim]
    request_id: int
    policy_version: str | int | None
    round_trip_s: float
    inference_s: float
    server_time_s: float


class PolicyClient:
    """``timeout_s`` bounds connecting and each blocking socket operation of a call (sending the
    request, then reading the reply), so a stalled server is noticed within about that time."""

    def __init__(
        self,
        host: str,
        port: int,
        token: str | None = None,
        timeout_s: float = 1.0,
        max_reply_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.host = host
        self.port = port
        self.token = token
        self.timeout_s = timeout_s
        self.max_reply_bytes = max_reply_bytes
        self._sock: socket.socket | None = None
        self._next_id = 0
        self._lock = threading.Lock()

    # -- public ---------------------------------------------------------------------------------

    def infer(self, observation: dict[str, Any]) -> ChunkReply:
        """Send one observation and wait for its action chunk."""
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            request = {
                "type": "infer",
                "token": self.token,
                "request_id": request_id,
                "observation": observation,
            }
            t0 = time.perf_counter()
            reply = self._call(request)
            round_trip_s = time.perf_counter() - t0
            if reply.get("type") != "chunk":
                self._fail("protocol", f"expected a 'chunk' reply, got {reply.get('type')!r}")
            if reply.get("request_id") != request_id:
                self._fail(
                    "protocol", f"reply is for request {reply.get('request_id')}, expected {request_id}"
                )
            actions = reply.get("actions")
            if not isinstance(actions, np.ndarray) or actions.ndim != 2:
                self._fail("protocol", "reply 'actions' is not a 2-d array")
            version = reply.get("policy_version")
            return ChunkReply(
                actions=actions.astype(np.float32, copy=False),
                request_id=request_id,
                policy_version=version if isinstance(version, str | int) else None,
                round_trip_s=round_trip_s,
                inference_s=float(reply.get("inference_s") or 0.0),
                server_time_s=float(reply.get("server_time_s") or 0.0),
            )

    def ping(self) -> float:
        """Round trip of a ping in seconds (checks reachability and the token)."""
        with self._lock:
            t0 = time.perf_counter()
            reply = self._call({"type": "ping", "token": self.token})
            if reply.get("type") != "pong":
                self._fail("protocol", f"expected 'pong', got {reply.get('type')!r}")
            return time.perf_counter() - t0

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> PolicyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------

    def _fail(self, code: str, message: str, cause: BaseException | None = None) -> NoReturn:
        self.close()
        raise PolicyServerError(code, message) from cause

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
            except TimeoutError as exc:
                self._fail("timeout", f"connecting to {self.host}:{self.port} timed out", exc)
            except OSError as exc:
                self._fail("connection", f"cannot connect to {self.host}:{self.port}: {exc}", exc)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.settimeout(self.timeout_s)
            self._sock = sock
        return self._sock

    def _call(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            payload = wire.encode(request)
        except wire.WireError as exc:
            raise PolicyServerError("bad_request", f"observation cannot be encoded: {exc}") from exc
        sock = self._connect()
        try:
            wire.send_frame(sock, payload)
            reply = wire.decode(wire.recv_frame(sock, self.max_reply_bytes), max_bytes=self.max_reply_bytes)
        except TimeoutError as exc:
            self._fail("timeout", f"no reply within {self.timeout_s} s", exc)
        except wire.WireError as exc:
            self._fail("protocol", f"bad reply: {exc}", exc)
        except OSError as exc:  # includes StreamClosedError, ConnectionResetError, BrokenPipeError
            self._fail("connection", f"connection to {self.host}:{self.port} lost: {exc}", exc)
        if reply.get("type") == "error":
            code = reply.get("code") if isinstance(reply.get("code"), str) else "protocol"
            # The server closes the stream after 'too_large'; reconnect next time in every case.
            self._fail(code, str(reply.get("message", "")))
        return reply
