"""benchmarks/gym_hil_sac.py --quick: LeRobot's SAC (in .venv-lerobot) and vla-rl's RLPD on gym-hil's
pick-cube, the whole pipeline at toy size (demonstrations, both learners, both evaluations, the table)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.gym_hil_sac import lerobot_python  # noqa: E402


def test_quick_run_compares_both_learners(tmp_path: Path) -> None:
    if lerobot_python() is None:
        pytest.skip("LeRobot's venv is absent (.venv-lerobot or LR_PYTHON): `make test-lerobot` builds it")
    name = "gym_hil_sac_quick"
    command = [sys.executable, "-m", "benchmarks.gym_hil_sac", "--quick", f"--work-dir={tmp_path}"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "| LeRobot SAC |" in result.stdout and "| vla-rl RLPD |" in result.stdout
    results = json.loads((REPO / "benchmarks" / "results" / f"{name}.json").read_text())
    assert results["expert_success"] == 1.0
    for side in ("lerobot", "rlpd"):
        assert results[side]["env_steps"] == results["env_steps"] == 150
        assert 0.0 <= results[side]["success_rate"] <= 1.0 and results[side]["run_wall_s"] > 0
    assert results["lerobot"]["demo_transitions"] > 0
