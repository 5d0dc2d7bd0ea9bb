"""LeRobot 0.4 as the reference: its side runs as scripts in .venv-lerobot (``make test-lerobot`` builds it
and names its python in ``LR_PYTHON``), writing files that the tests here, in the main venv, compare."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(REPO) not in sys.path:  # the benchmarks package, whose helpers some of these tests drive
    sys.path.insert(0, str(REPO))

from benchmarks.common import lerobot_env  # noqa: E402


def lerobot_python() -> Path | None:
    """The reference venv's python: ``LR_PYTHON``, else the repository's ``.venv-lerobot``."""
    configured = os.environ.get("LR_PYTHON")
    path = Path(configured) if configured else REPO / ".venv-lerobot" / "bin" / "python"
    return path if path.is_file() else None


@pytest.fixture(scope="session")
def run_lerobot(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, np.ndarray]]:
    """``run_lerobot(script, *args, out=PATH)`` runs ``tests/lerobot/<script>`` with .venv-lerobot's
    python, offline, and returns the arrays it saved to ``out`` (an .npz)."""
    python = lerobot_python()
    if python is None:
        pytest.skip(
            "LeRobot's reference venv is absent (.venv-lerobot or LR_PYTHON): `make test-lerobot` builds it "
            "from constraints/lerobot.txt and runs these tests"
        )
    env = lerobot_env(tmp_path_factory.mktemp("hf_home"))

    def run(script: str, *args: object, out: Path) -> dict[str, np.ndarray]:
        command = [str(python), str(HERE / script), *map(str, args)]
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            output = f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
            raise AssertionError(f"{' '.join(command)} failed ({result.returncode}):\n{output}")
        with np.load(out) as arrays:
            return dict(arrays)

    return run


@pytest.fixture(scope="session")
def openpi_dir() -> Path:
    """An openpi checkout (``OPENPI_DIR``): LeRobot 0.4's pi0 / pi0.5 run only with openpi's modified
    transformers files, which the scripts apply to a temporary copy of transformers and which are not
    committed here; the tests that run LeRobot's pi0 / pi0.5 skip without it."""
    configured = os.environ.get("OPENPI_DIR")
    if not configured:
        pytest.skip(
            "OPENPI_DIR (an openpi checkout) is not set: LeRobot's pi0 / pi0.5 need openpi's transformers "
            "files to run"
        )
    return Path(configured)


@pytest.fixture(scope="session")
def openpi_python() -> Path:
    """A python that runs openpi's own code (``OPENPI_PYTHON``: the throw-away venv of
    docs/guide/openpi_export.md, openpi's pinned JAX / flax / sentencepiece over .venv-lerobot's torch and
    transformers); the check that rebuilds the openpi fixtures skips without it."""
    configured = os.environ.get("OPENPI_PYTHON")
    if not configured or not Path(configured).is_file():
        pytest.skip(
            "OPENPI_PYTHON (a python with openpi's dependencies, docs/guide/openpi_export.md) is not set: "
            "openpi's own code cannot run"
        )
    return Path(configured)
