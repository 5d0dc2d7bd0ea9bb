"""The learner server on 127.0.0.1: transitions into the replay exactly, resends stored once, refused
messages (oversized, corrupted, badly shaped, wrong token) with the server serving on, weights by
version and checksum, and a learner whose actor process is killed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from remote_learner import REMOTE_REACH_LEARNER, free_port
from vla_rl.real_world import wire
from vla_rl.real_world.learner_client import LearnerClient
from vla_rl.real_world.learner_server import LearnerServer, serve_learner

from vla_rl.data.replay_buffer import ReplayBuffer
from vla_rl.training.jobs import job_config
from vla_rl.training.off_policy.config import ReplayConfig
from vla_rl.training.off_policy.remote_link import TransitionSpec
from vla_rl.training.off_policy.remote_source import RemoteSource
from vla_rl.training.off_policy.trainer import OffPolicyTrainer

SPEC = TransitionSpec({"proprio": (3,)}, action_dim=2, worlds=2)
TOKEN = "learner-secret"


def message(steps: int, start: float = 0.0) -> dict:
    rows = steps * SPEC.worlds
    values = np.arange(start, start + 9 * rows, dtype=np.float32)
    return {
        "obs": {"proprio": values[: 3 * rows].reshape(rows, 3)},
        "next_obs": {"proprio": values[3 * rows : 6 * rows].reshape(rows, 3)},
        "action": values[6 * rows : 8 * rows].reshape(rows, 2),
        "reward": values[8 * rows :],
        "terminated": np.arange(rows) % 2 == 0,
        "truncated": np.arange(rows) % 3 == 0,
        "intervention": np.arange(rows) % 4 == 0,
    }


def remote_source() -> RemoteSource:
    cfg = ReplayConfig(capacity=64, batch_size=2, learning_starts=2)
    replay = ReplayBuffer(cfg.capacity, SPEC.worlds, obs_keys=["proprio"])
    return RemoteSource(SPEC, replay, cfg, 1, seed=0, weights=torch.nn.Linear(3, 2))


@pytest.fixture
def learner():
    src = remote_source()
    with LearnerServer(src.link, token=TOKEN, max_request_bytes=8192) as server:
        yield src, server


def raw_call(address: tuple[str, int], request: dict) -> dict:
    with socket.create_connection(address, timeout=2.0) as sock:
        wire.send_frame(sock, wire.encode(request))
        return wire.decode(wire.recv_frame(sock, 1 << 20))


def transitions_request(seq: int, transitions: dict, token: str | None = TOKEN) -> dict:
    return {"type": "transitions", "token": token, "actor_id": "a", "seq": seq, "transitions": transitions}


def test_transitions_round_trip_into_the_replay_exactly_and_a_resend_is_stored_once(learner) -> None:
    src, server = learner
    sent = [message(2), message(1, 1_000.0)]
    with LearnerClient(*server.address, torch.nn.Linear(3, 2), token=TOKEN) as client:
        assert all(client.send_transitions(m) for m in sent) and client.sent_rows == 6
    again = raw_call(server.address, {**transitions_request(0, sent[0]), "actor_id": client.actor_id})
    assert again == {"type": "ack", "actor_id": client.actor_id, "seq": 0, "accepted": 0, "duplicate": True}
    assert src.drain() == 6 and src.actor_seqs == {client.actor_id: 1}
    stored = src.replay.gather(src.replay.valid_slots())
    np.testing.assert_array_equal(
        stored.obs["proprio"].numpy(), np.concatenate([m["obs"]["proprio"] for m in sent])
    )
    np.testing.assert_array_equal(
        stored.next_obs["proprio"].numpy(), np.concatenate([m["next_obs"]["proprio"] for m in sent])
    )
    for field in ("action", "reward", "terminated", "truncated", "intervention"):
        np.testing.assert_array_equal(
            getattr(stored, field).numpy(), np.concatenate([m[field] for m in sent])
        )
    assert server.stats["transitions"] == 6 and server.stats["duplicates"] == 1


def assert_still_serves(server: LearnerServer, seq: int) -> None:
    reply = raw_call(server.address, transitions_request(seq, message(1)))
    assert reply["type"] == "ack" and reply["accepted"] == 2


def test_refused_messages_get_a_reply_store_nothing_and_the_server_serves_on(learner) -> None:
    src, server = learner
    wrong_dim = message(1) | {"action": np.zeros((2, 3), np.float32)}
    wrong_dtype = message(1) | {"reward": np.zeros(2, np.float64)}
    odd_rows = message(1) | {"reward": np.zeros(1, np.float32)}
    no_key = message(1) | {"obs": {"privileged": np.zeros((2, 3), np.float32)}}
    cases = [
        (transitions_request(0, wrong_dim), "bad_request"),
        (transitions_request(0, wrong_dtype), "bad_request"),
        (transitions_request(0, odd_rows), "bad_request"),
        (transitions_request(0, no_key), "bad_request"),
        (transitions_request(0, [1, 2]), "bad_request"),
        (transitions_request(-1, message(1)), "bad_request"),
        ({**transitions_request(0, message(1)), "actor_id": ""}, "bad_request"),
        (transitions_request(0, message(1), token="wrong"), "unauthorized"),
        (transitions_request(0, message(1), token=None), "unauthorized"),
    ]
    for request, code in cases:
        reply = raw_call(server.address, request)
        assert reply["type"] == "error" and reply["code"] == code, (request, reply)
    with socket.create_connection(server.address, timeout=2.0) as sock:  # corrupted bytes
        payload = bytearray(wire.encode(transitions_request(0, message(1))))
        payload[len(payload) // 2 :] = b"\xc1" * (len(payload) - len(payload) // 2)
        wire.send_frame(sock, bytes(payload))
        assert wire.decode(wire.recv_frame(sock, 1 << 20))["code"] == "bad_request"
    assert src.link.inbox.drain() == []
    assert_still_serves(server, 0)
    with socket.create_connection(server.address, timeout=2.0) as sock:  # oversized: answered, then closed
        sock.sendall((server.max_request_bytes + 1).to_bytes(4, "big") + b"x" * 64)
        assert wire.decode(wire.recv_frame(sock, 1 << 20))["code"] == "too_large"
        with pytest.raises((wire.StreamClosedError, ConnectionResetError)):
            wire.recv_frame(sock, 1 << 20)
    with LearnerClient(*server.address, torch.nn.Linear(3, 2), token=TOKEN) as client:
        client.send_transitions(message(200))  # over 8 KiB: refused for good, so not kept for a resend
        assert client.last_error.code == "too_large" and client.dropped == 1 and not client.pending
    assert_still_serves(server, 1)
    assert server.stats["rejections"] == {"bad_request": 8, "too_large": 2, "unauthorized": 2, "internal": 0}


class CorruptingLearnerServer(LearnerServer):
    """A learner whose weight replies get one number changed on the way (after the checksum)."""

    def weights_reply(self, published):  # noqa: ANN001, ANN201
        reply = super().weights_reply(published)
        state = {name: value.copy() for name, value in reply["state"].items()}
        state["weight"][0, 0] += 1.0
        return reply | {"state": state}


def test_weights_load_by_version_and_checksum_and_a_corrupted_payload_is_refused() -> None:
    src = remote_source()
    actor = torch.nn.Linear(3, 2)
    with LearnerServer(src.link) as server, LearnerClient(*server.address, actor) as client:
        assert not client.sync_weights() and client.holding  # nothing published yet
        src.publish(0)
        assert client.sync_weights() and (client.version, client.holding) == (0, False)
        assert torch.equal(actor.weight, src.weights.weight)
        assert not client.sync_weights() and server.stats["unchanged"] == 2
        with torch.no_grad():
            src.weights.weight.add_(0.5)
        src.publish(1)
        assert client.sync_weights() and client.version == 1 and torch.equal(actor.weight, src.weights.weight)
        good = {name: value.clone() for name, value in actor.state_dict().items()}
    src.publish(2)
    with CorruptingLearnerServer(src.link) as bad, LearnerClient(*bad.address, actor) as client:
        client.version, client.checksum = 1, "held"
        assert not client.sync_weights() and client.rejected_weights == 1
        assert "checksum mismatch" in str(client.last_error) and client.version == 1
        for name, value in actor.state_dict().items():
            assert torch.equal(value, good[name])


def test_a_killed_actor_leaves_a_learner_that_updates_no_more_and_serves_on(tmp_path: Path) -> None:
    overrides = [
        *REMOTE_REACH_LEARNER,
        f"remote.port={free_port()}",
        f"run_dir={tmp_path}",
        "total_env_steps=100000",
    ]
    trainer = OffPolicyTrainer(job_config("off_policy", overrides))
    actor = subprocess.Popen(
        [sys.executable, "-m", "vla_rl.real_world.sim_actor", "100000", *overrides],
        env=os.environ.copy(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen: dict[str, object] = {}

    def watch() -> None:
        try:
            deadline = time.monotonic() + 60.0
            while trainer.iteration < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            actor.send_signal(signal.SIGKILL)
            actor.wait(timeout=10.0)
            time.sleep(1.0)  # what the actor sent before it died is taken in
            src = trainer.source
            seen["after_kill"] = (trainer.iteration, src.env_steps)
            time.sleep(1.5)
            seen["later"] = (trainer.iteration, src.env_steps)
            seen["owed"] = (src.env_steps - trainer.cfg.replay.learning_starts) // src.rows_per_update
            with LearnerClient(*src_address(trainer), torch.nn.Linear(1, 1), actor_id="next") as client:
                seen["ping"] = client.ping()
                client.send_transitions(_one_step(trainer))  # one more step: exactly one update
            deadline = time.monotonic() + 10.0
            while trainer.iteration == seen["later"][0] and time.monotonic() < deadline:
                time.sleep(0.05)
            seen["final"] = trainer.iteration
        finally:
            trainer.request_stop()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = serve_learner(trainer)
    finally:
        watcher.join(timeout=60.0)
        if actor.poll() is None:
            actor.kill()
        trainer.close()
    assert seen["after_kill"][0] >= 3 and seen["later"] == seen["after_kill"], actor.stderr.read()[-2000:]
    assert seen["later"][0] == seen["owed"]  # every update its data paid for, and no other
    assert seen["ping"] is True and seen["final"] == seen["later"][0] + 1
    assert result.stop_reason == "interrupted" and result.iterations == seen["final"]


def src_address(trainer: OffPolicyTrainer) -> tuple[str, int]:
    return "127.0.0.1", trainer.cfg.remote.port


def _one_step(trainer: OffPolicyTrainer) -> dict:
    """One batched step of zeros of the trainer's shapes."""
    spec = trainer.source.link.spec
    rows = spec.worlds
    obs = {key: np.zeros((rows, *shape), np.float32) for key, shape in spec.obs_shapes.items()}
    flags = np.zeros(rows, dtype=bool)
    return {
        "obs": obs,
        "next_obs": obs,
        "action": np.zeros((rows, spec.action_dim), np.float32),
        "reward": np.zeros(rows, np.float32),
        "terminated": flags,
        "truncated": flags,
        "intervention": flags,
    }
