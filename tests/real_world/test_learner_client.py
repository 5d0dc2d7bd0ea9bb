"""The actor's client: it holds until it has weights, backs off from a learner it cannot reach, and
lives through a learner process killed with SIGKILL and restarted from its last checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from remote_learner import REMOTE_REACH_LEARNER, free_port
from vla_rl.real_world.learner_client import LearnerClient
from vla_rl.real_world.sim_actor import transitions_message

from vla_rl.data.replay_buffer import ReplayBuffer
from vla_rl.envs import make_env
from vla_rl.policies.sac_networks import SACPolicy
from vla_rl.training.checkpoint import find_resume_checkpoint
from vla_rl.training.jobs import job_config


def test_without_a_learner_the_client_holds_and_backs_off() -> None:
    client = LearnerClient("127.0.0.1", free_port(), torch.nn.Linear(2, 2), backoff_s=0.5, timeout_s=0.5)
    assert not client.sync_weights() and client.holding and client.last_error.code == "connection"
    started = time.perf_counter()
    assert not client.sync_weights() and not client.send_transitions({"reward": 1})  # backing off
    assert time.perf_counter() - started < 0.05 and len(client.pending) == 1 and client.next_seq == 1
    client.close()


LEARNER = [*REMOTE_REACH_LEARNER, "checkpoint_interval=5", "total_env_steps=100000"]


def start_learner(overrides: list[str], log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "vla_rl.cli", "train", *overrides]
    return subprocess.Popen(command, env=os.environ.copy(), stdout=log.open("a"), stderr=subprocess.STDOUT)


def replay_of_latest(run_dir: Path) -> ReplayBuffer:
    """The replay snapshot of the run's latest checkpoint."""
    return ReplayBuffer.load(find_resume_checkpoint(str(run_dir), run_dir).path / "replay.safetensors")


def run_until(condition, step, timeout_s: float, log: Path) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        step()


def test_a_killed_learner_leaves_the_actor_its_weights_and_a_resumed_one_takes_it_back(
    tmp_path: Path,
) -> None:
    run_dir, log = tmp_path / "learner", tmp_path / "learner.log"
    overrides = [*LEARNER, f"remote.port={free_port()}", f"run_dir={run_dir}"]
    cfg = job_config("off_policy", overrides)
    env = make_env(cfg.env)
    networks = SACPolicy(cfg.policy.obs_keys, env.observation_space, 4, cfg.policy.hidden_sizes)
    client = LearnerClient("127.0.0.1", cfg.remote.port, networks.acting(), backoff_s=0.05, max_backoff_s=0.2)
    obs, _ = env.reset(seed=0)

    def act() -> None:
        """One step of the actor's loop: weights, then a step only when not holding."""
        nonlocal obs
        client.sync_weights()
        if client.holding:
            time.sleep(0.05)
            return
        with torch.no_grad():
            action, _ = networks.actor.sample(networks.encode(obs))
        result = env.step(action)
        client.send_transitions(transitions_message(cfg.policy.obs_keys, obs, action, result))
        obs = result.obs

    learner = start_learner(overrides, log)
    try:
        run_until(lambda: client.version is not None and client.version >= 6, act, 60.0, log)
        learner.send_signal(signal.SIGKILL)
        learner.wait(timeout=10.0)
        held = {name: value.clone() for name, value in networks.actor.state_dict().items()}
        held_version, sent = client.version, client.sent_rows
        for _ in range(10):  # the actor goes on with its last weights; its transitions wait
            act()
        assert not client.holding and client.version == held_version and client.sent_rows == sent
        assert len(client.pending) == 10 and all(
            torch.equal(value, held[name]) for name, value in networks.actor.state_dict().items()
        )

        checkpoint = find_resume_checkpoint(str(run_dir), run_dir)
        assert checkpoint is not None
        saved = ReplayBuffer.load(checkpoint.path / "replay.safetensors")
        learner = start_learner([f"resume={run_dir}"], log)  # the run's own config, port included
        run_until(lambda: client.flush() and client.version != held_version, act, 60.0, log)
        assert client.sent_rows >= sent + 20  # the queued steps arrived once the learner was back
        # The resumed learner may first make updates that the checkpoint's data already paid for (the
        # killed one had drained more than it had used), so its first new checkpoint can hold the same
        # transitions; wait for one that holds the resent ones too.
        run_until(
            lambda: replay_of_latest(run_dir).transitions_written > saved.transitions_written, act, 90.0, ""
        )
    finally:
        learner.kill()
        learner.wait(timeout=10.0)
        client.close()
        env.close()
    resumed = replay_of_latest(run_dir)
    kept = torch.arange(saved.transitions_written)  # the resumed replay begins with what was saved
    before, after = saved.gather(kept), resumed.gather(kept)
    for name in ("action", "reward", "terminated", "truncated"):
        assert torch.equal(getattr(before, name), getattr(after, name))
    for key in before.obs:
        assert torch.equal(before.obs[key], after.obs[key]) and torch.equal(
            before.next_obs[key], after.next_obs[key]
        )
    assert resumed.transitions_written > saved.transitions_written
    assert "resumed from" in log.read_text()


@pytest.mark.parametrize("token", [None, "wrong"])
def test_a_wrong_token_is_refused_and_the_client_stays_holding(token: str | None) -> None:
    from vla_rl.real_world.learner_server import LearnerServer

    from vla_rl.training.off_policy.remote_link import LearnerLink, TransitionSpec

    link = LearnerLink(TransitionSpec({"proprio": (1,)}, 1, 1))
    link.weights.publish(0, torch.nn.Linear(1, 1))
    with LearnerServer(link, token="right") as server:
        with LearnerClient(*server.address, torch.nn.Linear(1, 1), token=token) as client:
            assert not client.sync_weights() and client.holding and client.last_error.code == "unauthorized"
        with LearnerClient(*server.address, torch.nn.Linear(1, 1), token="right") as client:
            assert client.sync_weights() and not client.holding


def test_a_sim_actor_sends_camera_frames_as_uint8_and_the_rest_as_float32() -> None:
    from vla_rl.envs.base import StepResult
    from vla_rl.training.off_policy.remote_link import TransitionSpec

    frames = torch.randint(0, 256, (2, 4, 4, 3), dtype=torch.uint8)
    obs = {"rgb_front": frames, "proprio": torch.arange(6, dtype=torch.float64).reshape(2, 3)}
    final = {"rgb_front": frames.flip(0), "proprio": -obs["proprio"]}
    flags = torch.zeros(2, dtype=torch.bool)
    result = StepResult(obs, torch.ones(2), flags, flags, {"final_obs": final})
    message = transitions_message(["rgb_front", "proprio"], obs, torch.zeros(2, 2), result)
    rows = TransitionSpec({"rgb_front": (4, 4, 3), "proprio": (3,)}, action_dim=2, worlds=2).check(message)
    assert torch.equal(torch.from_numpy(rows.obs["rgb_front"]), frames)
    assert torch.equal(torch.from_numpy(rows.next_obs["rgb_front"]), frames.flip(0))
    assert rows.obs["proprio"].dtype.name == "float32" and rows.next_obs["proprio"][1, 2] == -5.0
