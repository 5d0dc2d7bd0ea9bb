"""The TCP server under the policy server and the learner server: framed :mod:`wire` messages,
one thread per connection, a shared-token check, error replies, and a server that outlives any client.

A subclass names its request types (``message_types``) and answers them in :meth:`MessageServer.handle`;
``ping`` is answered here. Every request carries ``"token"``; a reply to a failed request is
``{"type": "error", "code": str, "message": str, "request_id": int | None}`` with code ``bad_request``
(undecodable or badly shaped message), ``too_large`` (frame over the limit; the connection is then
closed because the stream cannot be resynchronised), ``unauthorized`` (token missing or wrong) or
``internal`` (the subclass failed). The token is an access check, not encryption: it travels in
clear, so across an untrusted network use an SSH tunnel or a VPN.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import logging
import socket
import socketserver
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

from vla_rl.real_world import wire

log = logging.getLogger(__name__)

ERROR_CODES = ("bad_request", "too_large", "unauthorized", "internal")


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback IP literals; hostnames other than localhost count as remote."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def drain_and_close(conn: socket.socket, budget_s: float = 1.0, max_bytes: int = 64 * 1024 * 1024) -> None:
    """Half-close, then discard what the peer is still sending (bounded in time and bytes).

    Closing a socket with unread input makes the kernel send a reset, which can destroy the error
    reply before the client reads it; draining first lets the client see why it was cut off.
    """
    try:
        conn.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + budget_s
        drained = 0
        while drained < max_bytes and (left := deadline - time.monotonic()) > 0:
            conn.settimeout(left)
            chunk = conn.recv(65536)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:
        pass


class RequestError(Exception):
    """Raised by a handler: the request gets an error reply with ``code`` (one of ``ERROR_CODES``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class _TCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True  # a restarted server binds its port at once
    owner: MessageServer


class _Handler(socketserver.BaseRequestHandler):
    server: _TCPServer

    def handle(self) -> None:
        self.server.owner._serve_connection(self.request)


class MessageServer:
    """Serve the subclass's ``message_types`` (and ``ping``) over TCP.

    ``idle_timeout_s`` closes connections that send nothing, so a vanished client does not hold a
    thread forever; connections beyond ``max_connections`` are closed at once (one thread each).
    """

    service = "messages"
    """What the server serves, for log lines and the token refusal."""
    message_types: ClassVar[tuple[str, ...]] = ()
    """Request types :meth:`handle` answers (``ping`` is answered by the base)."""
    counters: ClassVar[tuple[str, ...]] = ()
    """The subclass's counters in ``stats`` (beside ``requests``, ``pings`` and the connections)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_request_bytes: int = 32 * 1024 * 1024,
        max_depth: int = wire.DEFAULT_MAX_DEPTH,
        idle_timeout_s: float | None = 300.0,
        max_connections: int = 32,
    ) -> None:
        if not is_loopback_host(host) and not token:
            raise ValueError(
                f"refusing to serve {self.service} on non-loopback host {host!r} without a token: "
                "pass token=... (and tunnel the connection if the network is untrusted)"
            )
        self._host = host
        self._port = port
        self._token = token.encode() if token else None
        self.max_request_bytes = max_request_bytes
        self.max_depth = max_depth
        self.idle_timeout_s = idle_timeout_s
        self.max_connections = max_connections
        self._stats_lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._rejections: Counter[str] = Counter()
        self._conns: set[socket.socket] = set()
        self._server: _TCPServer | None = None
        self._thread: threading.Thread | None = None

    # -- what a subclass answers ----------------------------------------------------------------

    def handle(self, kind: str, message: dict[str, Any], request_id: int | None) -> dict[str, Any]:
        """The reply to an authorised request of one of ``message_types``; raise
        :class:`RequestError` to refuse it."""
        raise NotImplementedError

    # -- lifecycle ------------------------------------------------------------------------------

    def _bind(self) -> _TCPServer:
        if self._server is not None:
            raise RuntimeError("server already started")
        cls = _TCPServer
        if ":" in self._host:  # IPv6 literal
            cls = type("_TCPServer6", (_TCPServer,), {"address_family": socket.AF_INET6})
        self._server = server = cls((self._host, self._port), _Handler)
        server.owner = self
        log.info("%s server listening on %s:%d", self.service, *self.address)
        return server

    def start(self) -> MessageServer:
        """Bind and serve in a background daemon thread; returns self."""
        server = self._bind()
        kwargs = {"poll_interval": 0.05}
        self._thread = threading.Thread(target=server.serve_forever, kwargs=kwargs, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self, ready: Callable[[tuple[str, int]], None] | None = None) -> None:
        """Bind and serve in the calling thread until :meth:`stop` is called from another thread
        (in a process of its own, let SIGTERM/SIGKILL end it). ``ready(address)`` is called once the
        socket is bound, e.g. to report the port chosen for ``port=0``."""
        server = self._bind()
        if ready is not None:
            ready(self.address)
        server.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        """Stop accepting, close every open connection, and release the port."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._stats_lock:
            conns = list(self._conns)
        for conn in conns:  # wake handler threads blocked in recv
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None

    def __enter__(self) -> MessageServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) actually bound; the port is the real one when constructed with ``port=0``."""
        if self._server is None:
            raise RuntimeError("server not started")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def stats(self) -> dict[str, Any]:
        """Counters: ``requests`` (frames received), ``pings`` answered, the subclass's
        ``counters``, ``connections`` accepted and refused, and ``rejections`` by error code."""
        keys = ("requests", *self.counters, "pings", "connections", "refused_connections")
        with self._stats_lock:
            counts = {key: self._counts[key] for key in keys}
            return {**counts, "rejections": {code: self._rejections[code] for code in ERROR_CODES}}

    def count(self, key: str, amount: int = 1) -> None:
        with self._stats_lock:
            self._counts[key] += amount

    # -- per connection -------------------------------------------------------------------------

    def _serve_connection(self, conn: socket.socket) -> None:
        conn.settimeout(self.idle_timeout_s)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._stats_lock:
            if len(self._conns) >= self.max_connections:
                self._counts["refused_connections"] += 1
                log.warning("refusing a connection: %d already open", len(self._conns))
                return  # socketserver closes it
            self._conns.add(conn)
            self._counts["connections"] += 1
        try:
            while self._server is not None:
                try:
                    payload = wire.recv_frame(conn, self.max_request_bytes)
                except wire.FrameTooLargeError as exc:
                    self.count("requests")
                    self._send(conn, self._error("too_large", str(exc), None))
                    drain_and_close(conn)  # the unread payload makes the stream unusable
                    return
                except (OSError, wire.StreamClosedError):  # timeout, reset, peer gone, stop()
                    return
                self.count("requests")
                reply = self._handle_payload(payload)
                if not self._send(conn, reply):
                    return
        finally:
            with self._stats_lock:
                self._conns.discard(conn)

    def _send(self, conn: socket.socket, message: dict[str, Any]) -> bool:
        try:
            wire.send_frame(conn, wire.encode(message, max_bytes=wire.MAX_FRAME_BYTES))
            return True
        except wire.WireError:
            log.exception("could not encode a reply")
            return False
        except OSError:
            return False

    def _error(self, code: str, message: str, request_id: int | None) -> dict[str, Any]:
        with self._stats_lock:
            self._rejections[code] += 1
        return {"type": "error", "code": code, "message": message, "request_id": request_id}

    def _handle_payload(self, payload: bytes) -> dict[str, Any]:
        request_id = None
        try:
            try:
                message = wire.decode(payload, max_bytes=self.max_request_bytes, max_depth=self.max_depth)
            except wire.WireError as exc:
                raise RequestError("bad_request", str(exc)) from exc
            rid = message.get("request_id")
            if isinstance(rid, int) and not isinstance(rid, bool):
                request_id = rid
            kind = message.get("type")
            known = (*self.message_types, "ping")
            if kind not in known:
                raise RequestError("bad_request", f"unknown message type {kind!r} (expected one of {known})")
            self._check_token(message.get("token"))
            if kind == "ping":
                self.count("pings")
                return {"type": "pong", "server_time_s": time.time()}
            return self.handle(kind, message, request_id)
        except RequestError as exc:
            return self._error(exc.code, str(exc), request_id)

    def _check_token(self, token: Any) -> None:
        if self._token is None:
            return
        if not isinstance(token, str):
            raise RequestError("unauthorized", "missing token")
        # compare_digest on equal-type bytes: time does not depend on where the strings differ.
        if not hmac.compare_digest(token.encode(), self._token):
            raise RequestError("unauthorized", "wrong token")
