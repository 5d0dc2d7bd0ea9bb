"""The committed openpi fixtures are what ``make_openpi_fixtures.py`` writes with openpi's code today.

Needs an openpi checkout (``OPENPI_DIR``) and a python that runs openpi's code (``OPENPI_PYTHON``; see
docs/guide/openpi_export.md); without them this check skips. The parity tests against the committed
fixtures (tests/policies/flow/test_openpi_export.py) run everywhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "openpi"
POLICY_TYPES = ("pi0", "pi05")
TEXT_FILES = (
    "full_size_shapes.json",
    "policy/config.json",
    "policy/assets/tiny/libero_like/norm_stats.json",
    "tokenizer/tokenizer.json",
)


@pytest.fixture(scope="module")
def rebuilt(openpi_dir: Path, openpi_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("openpi_fixtures")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "JAX_PLATFORMS": "cpu", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    command = [str(openpi_python), str(HERE / "make_openpi_fixtures.py"), "--openpi", str(openpi_dir)]
    result = subprocess.run(
        [*command, "--out", str(out)], env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    return out


@pytest.mark.parametrize("policy_type", POLICY_TYPES)
def test_script_rebuilds_the_committed_fixture(policy_type: str, rebuilt: Path) -> None:
    with (
        np.load(FIXTURES / policy_type / "reference.npz") as committed,
        np.load(rebuilt / policy_type / "reference.npz") as fresh,
    ):
        assert sorted(committed.files) == sorted(fresh.files)
        for name in committed.files:
            np.testing.assert_array_equal(fresh[name], committed[name], err_msg=name)
    weights = load_file(str(rebuilt / policy_type / "policy" / "model.safetensors"))
    committed_weights = load_file(str(FIXTURES / policy_type / "policy" / "model.safetensors"))
    assert weights.keys() == committed_weights.keys()
    for name, values in committed_weights.items():
        np.testing.assert_array_equal(weights[name], values, err_msg=name)
    for name in TEXT_FILES:
        assert (rebuilt / policy_type / name).read_text() == (FIXTURES / policy_type / name).read_text(), name
