"""The client side of :class:`vla_rl.real_world.message_server.MessageServer`: one persistent TCP
connection, one request at a time.

Every failure (timeout, refused or dropped connection, malformed or error reply) raises the client's
``error_type`` and drops the connection, so the next call starts from a fresh one: a late reply to a
timed-out request can never be mistaken for the answer to a newer request.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, NoReturn

from vla_rl.real_world import wire


class ServerError(RuntimeError):
    """A call failed. ``code`` is the server's error code (``bad_request``, ``too_large``,
    ``unauthorized``, ``internal``) or a client-side one: ``timeout``, ``connection``, ``protocol``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code


class MessageClient:
    """``timeout_s`` bounds connecting and each blocking socket operation of a call (sending the
    request, then reading the reply), so a stalled server is noticed within about that time."""

    error_type: type[ServerError] = ServerError
    """What every failed call raises."""

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
        self._lock = threading.Lock()
        """Held by a subclass's public calls: one request at a time on the connection."""

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> MessageClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fail(self, code: str, message: str, cause: BaseException | None = None) -> NoReturn:
        self.close()
        raise self.error_type(code, message) from cause

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
        """Send ``request`` (the token added) and return the reply; an ``error`` reply raises."""
        try:
            payload = wire.encode({**request, "token": self.token})
        except wire.WireError as exc:
            raise self.error_type("bad_request", f"request cannot be encoded: {exc}") from exc
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

    def _ping(self) -> dict[str, Any]:
        reply = self._call({"type": "ping"})
        if reply.get("type") != "pong":
            self._fail("protocol", f"expected 'pong', got {reply.get('type')!r}")
        return reply
