"""The TCP server of an off-policy learner whose actors run on other machines (``source: remote``).

Protocol (:mod:`wire` messages, one frame each, every request with ``"token"``):

* ``{"type": "transitions", "actor_id": str, "seq": int, "transitions": {...}}`` (the layout of
  ``vla_rl.training.off_policy.remote_link``) -> ``{"type": "ack", "actor_id": str, "seq": int,
  "accepted": int, "duplicate": bool}``. ``seq`` numbers an actor's messages from 0 up; a message
  whose ``seq`` was already taken from that actor is acknowledged with ``accepted: 0`` and
  ``duplicate: true`` and not stored again, so an actor can resend whatever it is unsure about.
* ``{"type": "get_weights", "version": int | None, "checksum": str | None}`` (what the actor holds)
  -> ``{"type": "weights", "version": int, "checksum": str, "state": {name: float32 array}}``, or
  ``{"type": "unchanged", "version": int | None}`` when the actor holds the latest weights or none
  are published yet. The checksum is ``vla_rl.distributed.weights.state_checksum`` of the state.
* ``{"type": "ping"}`` -> ``{"type": "pong", ...}``; a refused request gets an ``error`` reply
  (:mod:`message_server`): a message of the wrong shape, dtype or keys is a ``bad_request`` and is
  not stored.

``serve_learner(trainer)`` runs a trainer built with ``source=remote`` behind this server.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from vla_rl.real_world.message_server import MessageServer, RequestError

from vla_rl.distributed.weights import state_checksum
from vla_rl.training.off_policy.remote_link import LearnerLink, Published
from vla_rl.training.off_policy.remote_source import RemoteSource
from vla_rl.training.off_policy.trainer import OffPolicyResult, OffPolicyTrainer

log = logging.getLogger(__name__)

MAX_ACTOR_ID_CHARS = 128


class LearnerServer(MessageServer):
    """Takes transitions into ``link``'s inbox and hands out the weights it publishes."""

    service = "a learner"
    message_types = ("transitions", "get_weights")
    counters = ("batches", "transitions", "duplicates", "weights", "unchanged")

    def __init__(
        self,
        link: LearnerLink,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        max_request_bytes: int = 64 * 1024 * 1024,
        idle_timeout_s: float | None = 300.0,
        max_connections: int = 32,
    ) -> None:
        super().__init__(
            host,
            port,
            token,
            max_request_bytes,
            idle_timeout_s=idle_timeout_s,
            max_connections=max_connections,
        )
        self.link = link
        self._reply_lock = threading.Lock()
        self._weights_reply: tuple[Published, dict[str, Any]] | None = None

    def handle(self, kind: str, message: dict[str, Any], request_id: int | None) -> dict[str, Any]:
        if kind == "transitions":
            return self._transitions(message)
        return self._weights(message)

    def _transitions(self, message: dict[str, Any]) -> dict[str, Any]:
        actor_id, seq = message.get("actor_id"), message.get("seq")
        if not isinstance(actor_id, str) or not 0 < len(actor_id) <= MAX_ACTOR_ID_CHARS:
            raise RequestError("bad_request", f"'actor_id' must be a str of 1 to {MAX_ACTOR_ID_CHARS} chars")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise RequestError("bad_request", "'seq' must be an int >= 0")
        try:
            rows = self.link.spec.check(message.get("transitions"))
        except ValueError as exc:
            raise RequestError("bad_request", str(exc)) from exc
        stored = self.link.inbox.put(actor_id, seq, rows)
        self.count("batches")
        self.count("transitions" if stored else "duplicates", len(rows) if stored else 1)
        accepted = len(rows) if stored else 0
        return {
            "type": "ack",
            "actor_id": actor_id,
            "seq": seq,
            "accepted": accepted,
            "duplicate": not stored,
        }

    def _weights(self, message: dict[str, Any]) -> dict[str, Any]:
        published = self.link.weights.latest()
        if published is None:
            self.count("unchanged")
            return {"type": "unchanged", "version": None}
        reply = self.weights_reply(published)
        if message.get("version") == reply["version"] and message.get("checksum") == reply["checksum"]:
            self.count("unchanged")
            return {"type": "unchanged", "version": reply["version"]}
        self.count("weights")
        return reply

    def weights_reply(self, published: Published) -> dict[str, Any]:
        """The ``weights`` reply of ``published`` (converted and checksummed once per publication)."""
        with self._reply_lock:
            if self._weights_reply is None or self._weights_reply[0] is not published:
                reply = {
                    "type": "weights",
                    "version": published.version,
                    "checksum": state_checksum(published.state),
                    "state": {name: value.numpy() for name, value in published.state.items()},
                }
                self._weights_reply = (published, reply)
            return self._weights_reply[1]


def learner_server(trainer: OffPolicyTrainer) -> LearnerServer:
    """The server of ``trainer`` (built with ``source=remote``) on ``trainer.cfg.remote``'s address;
    ``ValueError`` for a non-loopback host without a token."""
    if not isinstance(trainer.source, RemoteSource):
        raise ValueError("a learner server needs a trainer built with source=remote")
    remote = trainer.cfg.remote
    return LearnerServer(
        trainer.source.link, remote.host, remote.port, remote.token, remote.max_message_bytes
    )


def serve_learner(trainer: OffPolicyTrainer, server: LearnerServer | None = None) -> OffPolicyResult:
    """Train ``trainer`` while ``server`` (default: :func:`learner_server`) serves its actors; the
    server stops when training does."""
    with server or learner_server(trainer) as running:
        host, port = running.address
        log.info("learner serving actors on %s:%d", host, port)
        print(f"learner serving actors on {host}:{port}", flush=True)
        return trainer.train()
