"""What a run folder records when a run starts: its resolved config and the code that ran it.

A run made again with the same command can come out different when the code under it has changed;
``provenance.jsonl`` gets one line per start (a resumed run adds a line) naming the package
version, the git commit and whether the working tree had uncommitted changes (``null`` outside a
git checkout), and the versions of the libraries that shape the numbers.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import vla_rl
from vla_rl.config.structured import NOT_SAVED
from vla_rl.training.checkpoint import write_config

PROVENANCE_FILENAME = "provenance.jsonl"
RECORDED_PACKAGES = ("torch", "transformers", "peft", "mujoco", "numpy")
"""Distributions whose versions are recorded when installed."""


def git_state(directory: Path) -> tuple[str | None, bool | None]:
    """(HEAD commit, working tree has changes) of the checkout holding ``directory``; ``(None,
    None)`` when it is not in one or git is missing."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=no")
    return commit.strip(), None if status is None else bool(status.strip())


def package_versions(names: tuple[str, ...] = RECORDED_PACKAGES) -> dict[str, str]:
    """``{name: version}`` for the installed distributions among ``names``."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def provenance() -> dict[str, Any]:
    """The code and libraries of this process, and when and where it started."""
    commit, dirty = git_state(Path(vla_rl.__file__).resolve().parent)
    return {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "vla_rl": vla_rl.__version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "packages": package_versions(),
        "host": platform.node(),
        "argv": [without_secret(arg) for arg in sys.argv],
    }


def without_secret(arg: str) -> str:
    """A command-line argument as recorded: a ``*token=VALUE`` override's value is not saved."""
    key, sep, _ = arg.partition("=")
    return f"{key}={NOT_SAVED}" if sep and key.lstrip("+~").endswith("token") else arg


def record_run_start(run_dir: Path, cfg: Any) -> None:
    """Write the resolved ``cfg`` (a config dataclass) to ``config.yaml`` and append this start's
    provenance to ``provenance.jsonl`` in ``run_dir`` (created if missing)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    write_config(run_dir, cfg)
    with (run_dir / PROVENANCE_FILENAME).open("a") as record:
        record.write(json.dumps(provenance()) + "\n")
