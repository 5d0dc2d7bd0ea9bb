"""``vla-rl learn-online``: one config (``configs/learn_online.yaml``) starts an off-policy learner and
its actors beside the robots, or one of them (``--role``):

    vla-rl learn-online [overrides]                       # learner + `actors` actor processes here
    vla-rl learn-online --role learner [overrides]        # on the GPU box
    vla-rl learn-online --role actor --actor-index 0 [overrides]   # beside robot 0
    vla-rl learn-online --rehearsal [overrides]           # all of it against simulated robots over ROS 1

``--rehearsal`` starts, per actor, a ``roscore`` (port ``--master-port`` + index) and the simulated
robot as a ROS node on loopback (``rehearsal.ros_environment``), with the scripted expert standing in
for the person who takes over, the simulator's success flag (or ``success.classifier_path``'s
classifier) and the simulator's resets. Tests run it inside a private network namespace
(``unshare -n``). The session writes ``<output_dir>/learn_online.json``: the learner's updates and each
actor's episodes, weights versions and intervention steps.

When every actor is done, the learner is stopped with SIGINT (it writes a checkpoint with its replay
buffer; ``learner.resume`` continues it). Everything started is stopped on the way out.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from vla_rl.real_world.online_config import (
    LearnOnlineConfig,
    actor_env,
    as_deploy_config,
    compose_learn_online_config,
    learner_config,
)
from vla_rl.real_world.rehearsal import ros_environment, stop_process, wait_for_port

from vla_rl.config import ConfigError

log = logging.getLogger(__name__)

ROLES = ("all", "learner", "actor", "sim-robot")
SUMMARY_FILE = "online_summary.json"
LEARNER_RESULT_FILE = "learner_result.json"
LEARNER_START_TIMEOUT_S = 180.0
LEARNER_STOP_TIMEOUT_S = 120.0


def add_learn_online_parser(sub: Any) -> None:  # noqa: ANN401 - argparse's subparsers action
    parser = sub.add_parser(
        "learn-online",
        help="learn on robots: an off-policy learner and actors behind the safety layer (HIL-SERL style)",
    )
    parser.add_argument("--role", choices=ROLES, default="all", help="run one side only (default: all)")
    parser.add_argument("--actor-index", type=int, default=0, help="which actor (--role actor|sim-robot)")
    parser.add_argument(
        "--rehearsal",
        action="store_true",
        help="against simulated robots over ROS 1, the scripted expert taking over",
    )
    parser.add_argument("--master-port", type=int, default=11311, help="rehearsal: roscore port of actor 0")
    parser.add_argument("overrides", nargs="*", help="configs/learn_online.yaml overrides, e.g. episodes=20")


def rehearsal_overrides(overrides: list[str]) -> list[str]:
    """What ``--rehearsal`` puts under the given overrides: simulated robots over ROS 1, the scripted
    expert, the simulator's resets and success flag (a given ``success.classifier_path``: the classifier)."""
    keys = {o.partition("=")[0].lstrip("+~") for o in overrides}
    success = "classifier" if "success.classifier_path" in keys else "sim"
    defaults = ["robot.simulated=true", "robot.transport=ros1", "intervention.kind=expert", "reset.kind=sim"]
    return [*defaults, f"success.kind={success}", *overrides]


def session_config(args: argparse.Namespace) -> LearnOnlineConfig:
    overrides = list(args.overrides)
    cfg = compose_learn_online_config(rehearsal_overrides(overrides) if args.rehearsal else overrides)
    learner_config(cfg)  # the learner's own overrides, checked before anything starts
    if args.rehearsal and shutil.which("roscore") is None:
        raise ConfigError(
            "config key 'robot.transport': --rehearsal needs roscore (install ROS 1 with `make ros`)"
        )
    return cfg


def learn_online_command(args: argparse.Namespace) -> int:
    cfg = session_config(args)
    if args.role == "learner":
        return run_learner(cfg)
    if args.role == "actor":
        run_actor(cfg, args.actor_index)
        return 0
    if args.role == "sim-robot":
        return run_sim_robot(cfg, args.actor_index)
    result = run_session(cfg, args)
    print(json.dumps({k: v for k, v in result.items() if k != "actors"}))
    for actor in result["actors"]:
        if actor is not None:
            print(
                f"{actor['actor_id']}: {actor['episodes']} episodes, success rate {actor['success_rate']}, "
                f"{actor['intervention_steps']} intervention steps, weights versions "
                f"{actor['weights_versions'][:1]}..{actor['weights_versions'][-1:]}"
            )
    return 0 if result["ok"] else 1


# ----- the roles ------------------------------------------------------------------------------------------
def run_learner(cfg: LearnOnlineConfig) -> int:
    """The off-policy learner behind its server, until its budget or SIGINT; writes its result."""
    from vla_rl.real_world.learner_server import learner_server, serve_learner

    from vla_rl.training.off_policy.trainer import OffPolicyTrainer

    trainer = OffPolicyTrainer(learner_config(cfg))
    try:
        try:
            server = learner_server(trainer)
        except ValueError as error:
            raise ConfigError(f"config key 'learner.token': {error}") from None
        result = serve_learner(trainer, server)
    finally:
        trainer.close()
    summary = {
        "updates": result.iterations,
        "env_steps": result.env_steps,
        "stop_reason": result.stop_reason,
        "last_checkpoint": str(result.last_checkpoint),
        "run_dir": str(trainer.run_dir),
    }
    Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
    (Path(cfg.output_dir) / LEARNER_RESULT_FILE).write_text(json.dumps(summary, indent=2))
    print(f"learner: {result.iterations} updates on {result.env_steps} transitions ({result.stop_reason})")
    return 0


def run_sim_robot(cfg: LearnOnlineConfig, index: int) -> int:
    """The simulated robot of actor ``index`` as a ROS node, until interrupted."""
    from vla_rl.real_world.transports import run_sim_node

    env = actor_env(cfg, learner_config(cfg).env)
    run_sim_node(as_deploy_config(cfg, index), env, math.inf)
    return 0


def run_actor(cfg: LearnOnlineConfig, index: int) -> dict[str, Any]:
    """Actor ``index`` on its robot (``robot.transport``) for ``episodes`` episodes; writes and returns
    its summary (``<output_dir>/actor_<index>/online_summary.json``)."""
    from vla_rl.real_world.console_input import ConsoleLines
    from vla_rl.real_world.expert_intervention import intervention_input
    from vla_rl.real_world.learner_client import LearnerClient
    from vla_rl.real_world.online_actor import OnlineActor, actor_networks
    from vla_rl.real_world.online_reset import reset_routine
    from vla_rl.real_world.online_residual import frozen_planner
    from vla_rl.real_world.online_success import success_source
    from vla_rl.real_world.recording import session_recorder
    from vla_rl.real_world.transports import build_robot, build_sim_control

    off = learner_config(cfg)
    env = actor_env(cfg, off.env)
    deploy = as_deploy_config(cfg, index)
    out = Path(cfg.output_dir) / f"actor_{index}"
    networks = actor_networks(off)
    learner = cfg.learner
    actor_id = f"actor{index}-{uuid.uuid4().hex[:8]}"  # fresh per process: its numbering starts at 0
    client = LearnerClient(learner.host, learner.port, networks.acting(), learner.token, actor_id)
    console_needed = cfg.success.kind == "keyboard" or (
        cfg.reset.kind == "person" and not cfg.reset.person_topic
    )
    console = ConsoleLines() if console_needed else None
    robot = build_robot(deploy, env)
    with robot:
        sim = build_sim_control(deploy) if cfg.robot.simulated else None
        root = Path(cfg.recording.root) / f"actor_{index}" if cfg.recording.root else out / "dataset"
        recorder = session_recorder(cfg.recording, root, env, off.env.cameras)
        if cfg.intervention.kind == "device":
            from vla_rl.real_world.takeover_device import device_takeover

            intervention = device_takeover(cfg.takeover_device, env)
        else:
            intervention = intervention_input(deploy, env, robot)
        actor = OnlineActor(
            cfg,
            env,
            off.policy.obs_keys,
            networks,
            client,
            robot,
            success_source(cfg.success, sim, console),
            reset_routine(cfg.reset, robot, sim, 1.0 / env.control_hz, console),
            intervention,
            recorder,
            seed=deploy.seed,
            instruction=cfg.success.instruction,
            residual=frozen_planner(off),
        )
        try:
            summary = actor.run()
        finally:
            client.close()
            if recorder is not None:
                recorder.close()
            if sim is not None:
                sim.close()
    summary.write(out / SUMMARY_FILE)
    return summary.summary()


# ----- the session ----------------------------------------------------------------------------------------
def _wait_for_learner(process: subprocess.Popen, port: int, timeout_s: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the learner exited with {process.returncode}; see {log_path}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"the learner did not listen on port {port} within {timeout_s} s; see {log_path}")


def run_session(cfg: LearnOnlineConfig, args: argparse.Namespace) -> dict[str, Any]:
    """Start the learner, then (rehearsal: roscore and simulated robot, then) each actor; wait for the
    actors, stop the learner, stop everything; the session's result (also ``learn_online.json``)."""
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / LEARNER_RESULT_FILE).unlink(missing_ok=True)
    cli = [sys.executable, "-m", "vla_rl.cli", "learn-online"]
    given = [*(["--rehearsal"] if args.rehearsal else []), *args.overrides]
    logs: list[Any] = []

    def start(name: str, command: list[str], env: dict[str, str]) -> subprocess.Popen:
        logs.append(open(out / f"{name}.log", "w"))  # noqa: SIM115 - closed at the end
        return subprocess.Popen(command, env=env, stdout=logs[-1], stderr=subprocess.STDOUT)

    base_env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    services: list[subprocess.Popen] = []
    actors: list[subprocess.Popen] = []
    learner = start("learner", [*cli, "--role", "learner", *given], base_env)
    codes: list[int | None] = []
    try:
        _wait_for_learner(learner, cfg.learner.port, LEARNER_START_TIMEOUT_S, out / "learner.log")
        for index in range(cfg.actors):
            env = base_env
            role = [*cli, "--actor-index", str(index)]
            if args.rehearsal:
                master_port = args.master_port + index
                env = ros_environment(out / f"actor_{index}", master_port)
                core = [str(shutil.which("roscore")), "-p", str(master_port)]
                services.append(start(f"roscore_{index}", core, env))
                wait_for_port(master_port, 30.0)
                services.append(start(f"sim_robot_{index}", [*role, "--role", "sim-robot", *given], env))
            actors.append(start(f"actor_{index}", [*role, "--role", "actor", *given], env))
        codes = [actor.wait() for actor in actors]
    finally:
        for process in actors:
            stop_process(process)
        learner.send_signal(signal.SIGINT)
        try:
            learner.wait(LEARNER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            learner.kill()
            learner.wait()
        for process in reversed(services):
            stop_process(process)
        for handle in logs:
            handle.close()
    summaries = []
    for index in range(cfg.actors):
        path = out / f"actor_{index}" / SUMMARY_FILE
        summaries.append(json.loads(path.read_text()) if path.is_file() else None)
    learner_file = out / LEARNER_RESULT_FILE
    learner_result = json.loads(learner_file.read_text()) if learner_file.is_file() else None
    result = {
        "ok": all(code == 0 for code in codes) and len(codes) == cfg.actors and learner_result is not None,
        "rehearsal": bool(args.rehearsal),
        "actor_exit_codes": codes,
        "learner_exit_code": learner.returncode,
        "learner": learner_result,
        "actors": summaries,
        "stopped": all(p.poll() is not None for p in [learner, *actors, *services]),
    }
    (out / "learn_online.json").write_text(json.dumps(result, indent=2))
    return result
