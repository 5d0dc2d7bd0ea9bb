"""Running test processes inside a private network namespace (``unshare -n``, only ``lo``, up), so
ROS and DDS traffic never leaves it (cyclonedds and roscore's ``rosout`` bind every interface)."""

from __future__ import annotations

import functools
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path


@functools.cache
def private_namespace_unavailable() -> str | None:
    """Why a private network namespace cannot be made here, or None if it can."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2) to make a private network namespace"
    probe = subprocess.run(
        ["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, text=True, timeout=10
    )
    if probe.returncode != 0:
        return f"cannot make a private network namespace (unshare -n): {probe.stderr.strip()}"
    return None


def run_in_namespace(command: str, timeout_s: float) -> subprocess.CompletedProcess:
    """``command`` (a shell line) in a fresh private network namespace with ``lo`` up."""
    script = f"ip link set lo up && exec {command}"
    return subprocess.run(
        ["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=timeout_s
    )


def rehearse(work_dir: Path, overrides: list[str]) -> dict:
    """``python -m vla_rl.real_world.rehearsal`` in a namespace; its ``rehearsal.json``."""
    command = f"{sys.executable} -m vla_rl.real_world.rehearsal --work-dir {work_dir} "
    command += " ".join(shlex.quote(override) for override in overrides)
    proc = run_in_namespace(command, timeout_s=600)
    logs = "".join(f"\n--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(work_dir.glob("*.log")))
    assert proc.returncode == 0, proc.stderr[-3000:] + logs
    return json.loads((work_dir / "rehearsal.json").read_text())
