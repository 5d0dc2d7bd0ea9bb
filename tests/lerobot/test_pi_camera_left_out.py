"""``policy.camera_map={wrist: null}`` against LeRobot running the same fixture on a batch without
that camera (LeRobot masks a camera its observation lacks; vla-rl leaves it out of the prefix).

Needs openpi's ``transformers_replace`` files, as the fixture script does: give an openpi checkout in
``OPENPI_DIR`` (``OPENPI_DIR=... make test-lerobot``); without it this check skips.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.policies.env_maps import EnvMaps
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi05 import Pi05Policy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lerobot"
FAMILIES = {"pi0": Pi0Policy, "pi05": Pi05Policy}
TOLERANCE = 1e-4
"""float32 parity with the reference (the issue's bound)."""


@pytest.mark.parametrize("policy_type", sorted(FAMILIES))
def test_a_camera_left_out_acts_as_lerobot_without_it(
    policy_type: str,
    openpi_dir: Path,
    run_lerobot: Callable[..., dict[str, np.ndarray]],
    tmp_path: Path,
) -> None:
    fixture = FIXTURES / policy_type
    out = tmp_path / "left_out.npz"
    lerobot = run_lerobot(
        "lerobot_camera_left_out.py",
        "--openpi",
        openpi_dir,
        "--fixture",
        fixture,
        "--camera",
        "wrist",
        "--out",
        out,
        out=out,
    )
    with np.load(fixture / "reference.npz") as arrays:
        reference = dict(arrays)
    # the script's loading path is the fixture's, and the camera moves the actions by more than the
    # bound below, so a vla-rl that kept the camera (or read another) would fail it
    np.testing.assert_array_equal(lerobot["actions_all_cameras"], reference["actions"])
    assert float(np.abs(lerobot["actions"] - reference["actions"]).max()) > TOLERANCE

    policy = FAMILIES[policy_type].from_pretrained(
        str(fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer")
    )
    policy.set_env_maps(EnvMaps(camera_map={"wrist": None}))
    obs = {
        "rgb_front": reference["rgb_front"],
        "proprio": torch.as_tensor(reference["state"]),
        "instruction": [str(text) for text in reference["instructions"]],
    }
    actions = policy.eval().predict_action_chunk(obs, torch.tensor(reference["noise"])).numpy()
    difference = float(np.abs(actions - lerobot["actions"]).max())
    print(f"{policy_type} without the wrist camera: max |vla-rl - LeRobot| = {difference:.3g}")
    assert difference < TOLERANCE
