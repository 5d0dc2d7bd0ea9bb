"""``vla-rl learn-online``: the config is checked before anything starts (exit 2 naming the key), and
a short ``--rehearsal`` with two actors over real roscores, simulated robot nodes and a real learner
process, inside a private network namespace (``unshare -n``): the learner updates on what both
actors sent, the actors load newer weights as it does, the scripted expert's takeovers are counted,
and every process is stopped at the end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from namespaces import private_namespace_unavailable, run_in_namespace

LEARNER = [
    "algorithm=sac",
    "env=reach",
    "env.num_envs=1",
    "policy.hidden_sizes=[16,16]",
    "replay.batch_size=8",
    "replay.learning_starts=16",
    "eval.num_episodes=0",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "checkpoint_interval=1000",
]


def learner_list(overrides: list[str]) -> str:
    return "learner.overrides=[" + ",".join(f'"{o}"' for o in overrides) + "]"


def learn_online(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "vla_rl.cli", "learn-online", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("learner.port=0", "learner.port"),
        ("success.kind=sim robot.simulated=false max_steps=10", "success.kind"),
        ("learner.bind_host=0.0.0.0", "learner.token"),
        ("robot.sim_image_size=-1", "robot.sim_image_size"),
        ("robot.sim_image_width=-1", "robot.sim_image_width"),
        ("robot.image_transport=jpg", "robot.image_transport"),
        ("success.kind=classifier", "success.classifier_path"),
        (learner_list(["env.num_envs=4"]), "learner.overrides"),
        (learner_list(["algorithm=sac", "remote.port=1"]), "learner.overrides"),
    ],
)
def test_a_bad_config_is_refused_before_anything_starts(override: str, key: str, tmp_path: Path) -> None:
    proc = learn_online(*override.split(" "), f"output_dir={tmp_path}")
    assert proc.returncode == 2 and f"config key '{key}'" in proc.stderr, proc.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


def test_stop_process_interrupts_a_child_and_kills_one_that_ignores_it() -> None:
    from vla_rl.real_world.rehearsal import stop_process

    def child(ignore_sigint: bool) -> subprocess.Popen:
        # The polite child sets Python's own Ctrl-C handler: a child of a background job inherits
        # SIGINT ignored, and Python then installs none.
        handler = "signal.SIG_IGN" if ignore_sigint else "signal.default_int_handler"
        code = (
            f"import signal, time; signal.signal(signal.SIGINT, {handler}); "
            "print('ready', flush=True); time.sleep(60)"
        )
        process = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"  # its handlers are set
        return process

    polite, deaf = child(ignore_sigint=False), child(ignore_sigint=True)
    stop_process(polite)  # Ctrl-C: KeyboardInterrupt, then Python exits by SIGINT (or with 1)
    assert polite.returncode in (1, -2) and polite.stderr is not None
    assert b"KeyboardInterrupt" in polite.stderr.read()
    stop_process(deaf, timeout_s=0.5)
    assert deaf.returncode == -9  # SIGKILL after the timeout
    stop_process(deaf)  # already ended: nothing to do


def rehearsal_unavailable() -> str | None:
    """Why a ``learn-online --rehearsal`` cannot run here, or None."""
    if shutil.which("roscore") is None:
        return "roscore is not installed (make ros installs ROS 1 from the system's packages)"
    return private_namespace_unavailable()


def rehearse_session(out: Path, args: list[str]) -> dict:
    """``vla-rl learn-online --rehearsal ARGS output_dir=OUT`` in a private network namespace; its
    ``learn_online.json`` (the command's failure shows each process's log)."""
    command = f"{sys.executable} -m vla_rl.cli learn-online --rehearsal " + " ".join(
        [*args, f"output_dir={out}"]
    )
    proc = run_in_namespace(command, timeout_s=400)
    logs = "".join(f"\n--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(out.glob("*.log")))
    assert proc.returncode == 0, proc.stderr[-3000:] + logs
    return json.loads((out / "learn_online.json").read_text())


@pytest.mark.skipif(rehearsal_unavailable() is not None, reason=str(rehearsal_unavailable()))
def test_a_rehearsal_with_two_actors_learns_takes_over_and_shuts_down(tmp_path: Path) -> None:
    out = tmp_path / "session"
    args = [
        "--master-port=11411",
        f"'{learner_list(LEARNER)}'",
        "actors=2",
        "episodes=2",
        "learner.port=5613",
        "intervention.drift_threshold=-1",  # the expert takes over whenever its window is full
        "intervention.takeover_steps=5",
    ]
    result = rehearse_session(out, args)
    assert result["ok"] and result["stopped"] and result["actor_exit_codes"] == [0, 0]
    actors = result["actors"]
    sent = sum(actor["sent_rows"] for actor in actors)
    assert [actor["episodes"] for actor in actors] == [2, 2]
    assert sent == sum(actor["steps"] for actor in actors) and all(a["pending"] == 0 for a in actors)
    learner = result["learner"]
    assert learner["env_steps"] == sent  # both actors fed the one learner, each transition once
    assert learner["updates"] >= (sent - 16) // 2  # one update per new transition after the warm-up
    # An actor starts from the weights published when it connects (a late one after some updates) and
    # loads newer ones as the learner trains. The actors run in real time, so on a loaded machine the
    # learner may fall behind one actor's whole session; at least one of them must see newer weights
    # (tests/real_world/test_online_actor.py checks the reload itself against a learner it controls).
    versions = [actor["weights_versions"] for actor in actors]
    assert all(v == sorted(v) for v in versions) and any(v[-1] > v[0] for v in versions)
    for actor in actors:
        taken = [episode["intervention_steps"] for episode in actor["per_episode"]]
        assert actor["intervention_steps"] == sum(taken) > 0
        assert sum(actor["safety_counts"].values()) > 0  # its commands went through the safety layer
    assert Path(learner["last_checkpoint"]).is_dir()  # stopped by SIGINT, it saved first
    assert (out / "actor_1" / "dataset" / "meta" / "info.json").is_file()


@pytest.mark.skipif(rehearsal_unavailable() is not None, reason=str(rehearsal_unavailable()))
def test_a_rehearsal_with_a_pixel_learner_streams_camera_frames_and_updates(tmp_path: Path) -> None:
    # The learner reads the front and wrist cameras (32x32 here): the actor sends their frames as
    # uint8 with every step, and acts with the camera encoder the learner publishes beside the actor.
    out = tmp_path / "session"
    pixels = [*LEARNER, "observations=pixels", "env.image_size=32", "replay.capacity=1000"]
    args = [
        "--master-port=11411",
        f"'{learner_list(pixels)}'",
        "actors=1",
        "episodes=2",
        "learner.port=5613",
        "intervention.kind=none",  # the policy drives whole episodes: steps for the learner to update on
    ]
    result = rehearse_session(out, args)
    assert result["ok"] and result["stopped"] and result["actor_exit_codes"] == [0]
    (actor,) = result["actors"]
    # Every step is sent but those whose frames came late (none where the frames keep up).
    late = sum(e["unsynced_steps"] + e["late_frame_transitions"] for e in actor["per_episode"])
    assert (
        actor["episodes"] == 2 and actor["sent_rows"] == actor["steps"] - late > 40 and actor["pending"] == 0
    )
    learner = result["learner"]
    assert learner["env_steps"] == actor["sent_rows"] and learner["updates"] >= (actor["sent_rows"] - 16) // 2
    versions = actor["weights_versions"]
    assert versions == sorted(versions) and versions[-1] > versions[0]
