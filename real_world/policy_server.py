"""A TCP server that runs a chunked policy for a robot client (see ``policy_client.py``).

Protocol (messages in :mod:`vla_rl.real_world.wire` format, one frame per message, any number of
requests per connection, replies in request order):

* ``{"type": "infer", "token": str | None, "request_id": int, "observation": dict}`` ->
  ``{"type": "chunk", "request_id": int, "actions": float32 [chunk_len, action_dim],
  "policy_version": str | int | None, "server_time_s": float, "inference_s": float}``
* ``{"type": "ping", "token": str | None}`` -> ``{"type": "pong", "server_time_s": float}``
* any failure -> an ``error`` reply (``bad_request``, ``too_large``, ``unauthorized`` or
  ``internal``: ``infer`` raised or returned something unusable); see :mod:`message_server`.

The server never dies because of one client: each connection is handled in its own thread and every
error is turned into a reply or a closed connection (:class:`message_server.MessageServer`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from vla_rl.real_world import wire
from vla_rl.real_world.message_server import (
    ERROR_CODES,
    MessageServer,
    RequestError,
    is_loopback_host,
)

log = logging.getLogger(__name__)

__all__ = ["ERROR_CODES", "PolicyServer", "is_loopback_host"]


class PolicyServer(MessageServer):
    """Serve ``infer(observation) -> float32 [chunk_len, action_dim]`` over TCP.

    ``infer`` calls are serialised by a lock (a GPU policy is rarely thread-safe); set
    ``serialize_infer=False`` if yours is. ``idle_timeout_s`` and ``max_connections``: see
    :class:`MessageServer`.
    """

    service = "a policy"
    message_types = ("infer",)
    counters = ("chunks",)

    def __init__(
        self,
        infer: Callable[[dict[str, Any]], np.ndarray],
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_request_bytes: int = 32 * 1024 * 1024,
        max_depth: int = wire.DEFAULT_MAX_DEPTH,
        policy_version: str | int | None = None,
        idle_timeout_s: float | None = 300.0,
        serialize_infer: bool = True,
        max_connections: int = 32,
    ) -> None:
        super().__init__(host, port, token, max_request_bytes, max_depth, idle_timeout_s, max_connections)
        self._infer = infer
        self.policy_version = policy_version
        self._infer_lock = threading.Lock() if serialize_infer else None

    def handle(self, kind: str, message: dict[str, Any], request_id: int | None) -> dict[str, Any]:
        if request_id is None:
            raise RequestError("bad_request", "'request_id' must be an int")
        observation = message.get("observation")
        if not isinstance(observation, dict):
            raise RequestError("bad_request", "'observation' must be a map")
        t0 = time.perf_counter()
        try:
            if self._infer_lock is None:
                actions = self._infer(observation)
            else:
                with self._infer_lock:
                    actions = self._infer(observation)
            actions = np.asarray(actions, dtype=np.float32)
        except Exception as exc:
            log.exception("policy inference failed")
            raise RequestError("internal", f"inference failed: {type(exc).__name__}: {exc}") from exc
        inference_s = time.perf_counter() - t0
        if actions.ndim != 2:
            raise RequestError(
                "internal", f"policy returned shape {actions.shape}, expected [chunk, action_dim]"
            )
        self.count("chunks")
        return {
            "type": "chunk",
            "request_id": request_id,
            "actions": actions,
            "policy_version": self.policy_version,
            "server_time_s": time.time(),
            "inference_s": inference_s,
        }
