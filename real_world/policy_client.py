"""Robot-side client for :class:`vla_rl.real_world.policy_server.PolicyServer`.

One persistent TCP connection, one request at a time (:class:`message_client.MessageClient`): every
failure raises :class:`PolicyServerError` and drops the connection, so the next call starts afresh.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from vla_rl.real_world.message_client import MessageClient, ServerError


class PolicyServerError(ServerError):
    """Inference failed. ``code``: see :class:`vla_rl.real_world.message_client.ServerError`."""


@dataclass(frozen=True)
class ChunkReply:
    actions: np.ndarray  # float32 [chunk_len, action_dim]
    request_id: int
    policy_version: str | int | None
    round_trip_s: float
    inference_s: float
    server_time_s: float


class PolicyClient(MessageClient):
    """Asks the policy server for one action chunk per observation (``MessageClient``'s connection
    and timeouts); the requests of a client are numbered 1, 2, ..."""

    error_type = PolicyServerError
    _next_id = 0
    """The number of the last request sent (each client counts its own)."""

    # -- public ---------------------------------------------------------------------------------

    def infer(self, observation: dict[str, Any]) -> ChunkReply:
        """Send one observation and wait for its action chunk."""
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
            request = {
                "type": "infer",
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
            self._ping()
            return time.perf_counter() - t0

    def __enter__(self) -> PolicyClient:
        return self
