"""The committed pi0 / pi0.5 fixtures are what ``make_pi_fixtures.py`` writes with LeRobot today.

The script needs openpi's ``transformers_replace`` files (LeRobot 0.4's pi0 and pi0.5 refuse to run
without them), which are neither on the package index nor in this repository: give an openpi checkout
in ``OPENPI_DIR`` (``OPENPI_DIR=... make test-lerobot``). Without it this check skips; the parity
tests against the committed fixtures (tests/policies/flow/test_lerobot_pi.py) run everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lerobot"
POLICY_TYPES = ("pi0", "pi05")


@pytest.mark.parametrize("policy_type", POLICY_TYPES)
def test_script_rebuilds_the_committed_fixture(
    policy_type: str,
    openpi_dir: Path,
    run_lerobot: Callable[..., dict[str, np.ndarray]],
    tmp_path: Path,
) -> None:
    out = tmp_path / "fixtures"
    rebuilt = run_lerobot(
        "make_pi_fixtures.py",
        "--openpi",
        openpi_dir,
        "--out",
        out,
        "--types",
        policy_type,
        out=out / policy_type / "reference.npz",
    )
    with np.load(FIXTURES / policy_type / "reference.npz") as committed:
        assert sorted(committed.files) == sorted(rebuilt)
        for name in committed.files:
            np.testing.assert_array_equal(rebuilt[name], committed[name], err_msg=name)
    weights = load_file(str(out / policy_type / "policy" / "model.safetensors"))
    committed_weights = load_file(str(FIXTURES / policy_type / "policy" / "model.safetensors"))
    assert weights.keys() == committed_weights.keys()
    for name, values in committed_weights.items():
        np.testing.assert_array_equal(weights[name], values, err_msg=name)
    shapes = "full_size_shapes.json"
    assert (out / policy_type / shapes).read_text() == (FIXTURES / policy_type / shapes).read_text()
    for name in ("config.json", "policy_preprocessor.json", "policy_postprocessor.json"):
        assert (out / policy_type / "policy" / name).read_text() == (
            FIXTURES / policy_type / "policy" / name
        ).read_text()
