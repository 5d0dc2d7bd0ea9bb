"""The actor's side of :class:`vla_rl.real_world.learner_server.LearnerServer`: send transitions, pull
the learner's weights into the actor network.

Nothing here moves a robot. The caller acts with ``module`` (through the safety layer,
``safe_robot.SafeRobot``, on a real robot) and must send no motion command while :attr:`holding`:
the client has never loaded weights.

Faults. Every call returns at once while the client backs off after a failure (``backoff_s`` doubling
up to ``max_backoff_s``), so a control loop never waits on a dead learner. Transitions wait in a
bounded queue (the oldest dropped when it is full) until the learner acknowledges them, and a resend
keeps its number, so the learner stores each message once. Weights load only when their checksum
matches; otherwise, and while the learner is unreachable, the client keeps the weights it has.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from vla_rl.real_world.message_client import MessageClient, ServerError

from vla_rl.distributed.weights import state_checksum

log = logging.getLogger(__name__)

UNREACHABLE = ("connection", "timeout", "protocol")
"""Error codes after which the same request may succeed later (the rest refuse it for good)."""


class LearnerError(ServerError):
    """A call to the learner failed; ``code``: see :class:`message_client.ServerError`."""


@dataclass(frozen=True)
class Pending:
    seq: int
    transitions: dict[str, Any]


class LearnerClient(MessageClient):
    """One actor's connection to a learner. ``actor_id`` names the actor to the learner (default: a
    fresh random one, so a restarted actor is a new actor whose numbers start again at 0)."""

    error_type = LearnerError

    def __init__(
        self,
        host: str,
        port: int,
        module: torch.nn.Module,
        token: str | None = None,
        actor_id: str | None = None,
        timeout_s: float = 2.0,
        backoff_s: float = 0.1,
        max_backoff_s: float = 5.0,
        max_pending: int = 256,
        max_reply_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        super().__init__(host, port, token, timeout_s, max_reply_bytes)
        self.module = module
        self.actor_id = actor_id or f"actor-{uuid.uuid4().hex[:12]}"
        self.backoff_s, self.max_backoff_s = backoff_s, max_backoff_s
        self.pending: deque[Pending] = deque(maxlen=max_pending)
        """Messages not yet acknowledged, oldest first."""
        self.next_seq = 0
        self.version: int | None = None
        """Version of the weights loaded (None: never; the actor must hold)."""
        self.checksum: str | None = None
        self.sent_rows = 0
        """Rows the learner stored."""
        self.dropped = 0
        """Messages lost: pushed out of a full queue, or refused by the learner."""
        self.rejected_weights = 0
        """Weight replies refused (bad checksum or layout)."""
        self.last_error: Exception | None = None
        self._retry_at = 0.0
        self._delay_s = backoff_s

    @property
    def holding(self) -> bool:
        """True until weights have been loaded: the caller sends no motion command."""
        return self.version is None

    @property
    def backing_off(self) -> bool:
        return time.monotonic() < self._retry_at

    # -- transitions ----------------------------------------------------------------------------

    def send_transitions(self, transitions: dict[str, Any]) -> bool:
        """Queue one message (``remote_link``'s layout) and :meth:`flush`."""
        if len(self.pending) == self.pending.maxlen:
            self.dropped += 1
        self.pending.append(Pending(self.next_seq, transitions))
        self.next_seq += 1
        return self.flush()

    def flush(self) -> bool:
        """Send the queued messages in order; True when none is left."""
        with self._lock:
            while self.pending and not self.backing_off:
                head = self.pending[0]
                request = {"type": "transitions", "actor_id": self.actor_id, "seq": head.seq}
                reply = self._request({**request, "transitions": head.transitions}, "ack")
                if reply is None:
                    if isinstance(self.last_error, ServerError) and self.last_error.code in UNREACHABLE:
                        return False  # resent later with the same seq
                    self.dropped += 1  # refused as it is: resending cannot help
                    log.warning("learner refused transitions %d: %s", head.seq, self.last_error)
                elif reply.get("seq") == head.seq:
                    self.sent_rows += int(reply.get("accepted") or 0)
                self.pending.popleft()
            return not self.pending

    # -- weights --------------------------------------------------------------------------------

    def sync_weights(self) -> bool:
        """Ask for the learner's weights; True when new ones were loaded into ``module``."""
        with self._lock:
            if self.backing_off:
                return False
            request = {"type": "get_weights", "version": self.version, "checksum": self.checksum}
            reply = self._request(request, "weights", "unchanged")
            if reply is None or reply["type"] == "unchanged":
                return False
            try:
                state, version, checksum = self._verified(reply)
            except ValueError as exc:
                self.rejected_weights += 1
                self.last_error = exc
                log.warning("refused the learner's weights, keeping version %s: %s", self.version, exc)
                return False
            self.module.load_state_dict(state)
            self.version, self.checksum = version, checksum
            return True

    def _verified(self, reply: dict[str, Any]) -> tuple[dict[str, torch.Tensor], int, str]:
        version, checksum, arrays = reply.get("version"), reply.get("checksum"), reply.get("state")
        if not isinstance(version, int) or not isinstance(checksum, str) or not isinstance(arrays, dict):
            raise ValueError("a weights reply needs an int version, a str checksum and a state map")
        own = self.module.state_dict()
        if set(arrays) != set(own):
            raise ValueError(f"weights have keys {sorted(arrays)}, the actor {sorted(own)}")
        state = {}
        for name, value in arrays.items():
            if not isinstance(value, np.ndarray) or value.shape != tuple(own[name].shape):
                raise ValueError(f"weights {name!r} do not match the actor's {tuple(own[name].shape)}")
            state[name] = torch.from_numpy(value)
        if state_checksum(state) != checksum:
            raise ValueError(f"checksum mismatch for version {version}: the weights were corrupted")
        return state, version, checksum

    # -- calls ----------------------------------------------------------------------------------

    def ping(self) -> bool:
        with self._lock:
            return self._request({"type": "ping"}, "pong") is not None

    def _request(self, request: dict[str, Any], *expected: str) -> dict[str, Any] | None:
        """The reply (of an ``expected`` type), or None with ``last_error`` set. A connection lost
        since the last call is retried once at once (the learner may have restarted); failing
        again starts the back-off."""
        for attempt in range(2):
            reused = self._sock is not None
            try:
                reply = self._call(request)
                if reply.get("type") not in expected:
                    self._fail("protocol", f"expected {expected}, got {reply.get('type')!r}")
            except ServerError as exc:
                self.last_error = exc
                if exc.code in UNREACHABLE and attempt == 0 and reused:
                    continue
                if exc.code in UNREACHABLE:
                    self._retry_at = time.monotonic() + self._delay_s
                    self._delay_s = min(2 * self._delay_s, self.max_backoff_s)
                return None
            self._delay_s = self.backoff_s
            return reply
        return None
