"""A whole deployment rehearsal on one machine: the simulated robot and ``vla-rl deploy``, over ROS.

What the README's terminals do, as one command that cleans up after itself:

    python -m vla_rl.real_world.rehearsal --work-dir runs/rehearsal checkpoint=RUN episodes=20
    python -m vla_rl.real_world.rehearsal --work-dir runs/rehearsal robot.transport=ros2 checkpoint=RUN

The transport is the overrides' ``robot.transport``:

* ``ros1``: starts ``roscore``, then ``vla-rl sim-robot``, then runs ``vla-rl deploy``. Every ROS
  process advertises and binds 127.0.0.1 (``ROS_IP``); ``roscore``'s own ``rosout`` binds all
  interfaces regardless.
* ``ros2``: no master; ``vla-rl sim-robot`` and ``vla-rl deploy`` find each other by DDS discovery,
  configured (``CYCLONEDDS_URI``) for unicast on 127.0.0.1 only (``dds.loopback_config``). DDS
  participants still open sockets on all interfaces.

Either way tests run the rehearsal inside a private network namespace (``unshare -n``). Prints
(and writes to ``<work-dir>/rehearsal.json``) the deployment summary and the command latencies the
simulated robot measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def ros_environment(work_dir: Path, master_port: int) -> dict[str, str]:
    """Environment of every ROS 1 process of the rehearsal: loopback only, logs under ``work_dir``."""
    env = dict(os.environ)
    env.update(
        ROS_IP="127.0.0.1",
        ROS_MASTER_URI=f"http://127.0.0.1:{master_port}",
        ROS_HOME=str(work_dir / "ros"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("ROS_HOSTNAME", None)
    return env


def ros2_environment() -> dict[str, str]:
    """Environment of every ROS 2 (DDS) process of the rehearsal: discovery by unicast on 127.0.0.1."""
    from vla_rl.real_world.ros2.dds import loopback_config

    env = dict(os.environ)
    env.update(CYCLONEDDS_URI=loopback_config(), PYTHONUNBUFFERED="1")
    return env


def wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def stop_process(process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """Interrupt ``process`` (SIGINT, as Ctrl-C would) and wait ``timeout_s`` for it to end, then kill
    it; nothing if it has already ended."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def transport_of(overrides: list[str]) -> str:
    """The ``robot.transport`` the overrides select (validated like ``vla-rl deploy`` does)."""
    from vla_rl.real_world.deploy_config import compose_deploy_config

    return compose_deploy_config(list(overrides)).robot.transport


def run_rehearsal(
    overrides: list[str], work_dir: Path, master_port: int = 11311, deploy_timeout_s: float = 900.0
) -> dict[str, Any]:
    """Start the middleware (ROS 1: roscore) and the simulated robot, run ``vla-rl deploy`` to the
    end, stop everything. ``master_port`` is roscore's (ROS 1 only)."""
    transport = transport_of(overrides)
    roscore = None
    if transport == "ros1":
        roscore = shutil.which("roscore")
        if roscore is None:
            raise FileNotFoundError("roscore not found: install ROS 1 with `make ros`")
    work_dir.mkdir(parents=True, exist_ok=True)
    env = ros_environment(work_dir, master_port) if transport == "ros1" else ros2_environment()
    cli = [sys.executable, "-m", "vla_rl.cli"]
    sim_stats = work_dir / "sim_stats.json"
    names = ("roscore", "sim_robot", "deploy") if roscore else ("sim_robot", "deploy")
    logs = {name: open(work_dir / f"{name}.log", "w") for name in names}  # noqa: SIM115
    processes: list[subprocess.Popen] = []
    try:
        if roscore is not None:
            core = subprocess.Popen(
                [roscore, "-p", str(master_port)], env=env, stdout=logs["roscore"], stderr=subprocess.STDOUT
            )
            processes.append(core)
            wait_for_port(master_port, 30.0)
        sim = subprocess.Popen(
            [*cli, "sim-robot", *overrides, f"sim_stats_path={sim_stats}"],
            env=env,
            stdout=logs["sim_robot"],
            stderr=subprocess.STDOUT,
        )
        processes.append(sim)
        deploy = subprocess.run(
            [*cli, "deploy", *overrides, f"output_dir={work_dir / 'deploy'}"],
            env=env,
            stdout=logs["deploy"],
            stderr=subprocess.STDOUT,
            timeout=deploy_timeout_s,
        )
        if deploy.returncode != 0:
            raise RuntimeError(
                f"vla-rl deploy exited with {deploy.returncode}; see {work_dir / 'deploy.log'}"
            )
    finally:
        for process in reversed(processes):
            stop_process(process)
        for log in logs.values():
            log.close()
    result = {
        "transport": transport,
        "deploy": json.loads((work_dir / "deploy" / "deploy_summary.json").read_text()),
        "sim": json.loads(sim_stats.read_text()) if sim_stats.exists() else None,
    }
    (work_dir / "rehearsal.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--master-port", type=int, default=11311, help="roscore's port (ROS 1 only)")
    parser.add_argument("overrides", nargs="*", help="configs/deploy.yaml overrides, e.g. checkpoint=RUN")
    args = parser.parse_args(argv)
    result = run_rehearsal(args.overrides, args.work_dir, args.master_port)
    summary = {k: v for k, v in result["deploy"].items() if k != "per_episode"}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
