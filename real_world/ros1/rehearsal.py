"""A whole deployment rehearsal on one machine: ``roscore``, ``vla-rl sim-robot``, ``vla-rl deploy``.

What the README's three terminals do, as one command that cleans up after itself:

    python -m vla_rl.real_world.ros1.rehearsal --work-dir runs/rehearsal checkpoint=RUN episodes=20

Every ROS process advertises and binds 127.0.0.1 (``ROS_IP``); ``roscore``'s own ``rosout`` binds
all interfaces regardless, so tests run the rehearsal inside a private network namespace.
Prints (and writes to ``<work-dir>/rehearsal.json``) the deployment summary and the command
latencies the simulated robot measured.
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
    """Environment of every ROS process of the rehearsal: loopback only, logs under ``work_dir``."""
    env = dict(os.environ)
    env.update(
        ROS_IP="127.0.0.1",
        ROS_MASTER_URI=f"http://127.0.0.1:{master_port}",
        ROS_HOME=str(work_dir / "ros"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("ROS_HOSTNAME", None)
    return env


def wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


def _stop(process: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_rehearsal(
    overrides: list[str], work_dir: Path, master_port: int = 11311, deploy_timeout_s: float = 900.0
) -> dict[str, Any]:
    """Start roscore and the simulated robot, run ``vla-rl deploy`` to the end, stop everything."""
    roscore = shutil.which("roscore")
    if roscore is None:
        raise FileNotFoundError("roscore not found: install ROS 1 with `make ros`")
    work_dir.mkdir(parents=True, exist_ok=True)
    env = ros_environment(work_dir, master_port)
    cli = [sys.executable, "-m", "vla_rl.cli"]
    sim_stats = work_dir / "sim_stats.json"
    logs = {name: open(work_dir / f"{name}.log", "w") for name in ("roscore", "sim_robot", "deploy")}  # noqa: SIM115
    processes: list[subprocess.Popen] = []
    try:
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
            _stop(process)
        for log in logs.values():
            log.close()
    result = {
        "deploy": json.loads((work_dir / "deploy" / "deploy_summary.json").read_text()),
        "sim": json.loads(sim_stats.read_text()) if sim_stats.exists() else None,
    }
    (work_dir / "rehearsal.json").write_text(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--master-port", type=int, default=11311)
    parser.add_argument("overrides", nargs="*", help="configs/deploy.yaml overrides, e.g. checkpoint=RUN")
    args = parser.parse_args(argv)
    result = run_rehearsal(args.overrides, args.work_dir, args.master_port)
    summary = {k: v for k, v in result["deploy"].items() if k != "per_episode"}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
