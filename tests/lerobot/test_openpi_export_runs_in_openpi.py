"""openpi itself loads what ``vla-rl export --format openpi`` writes and acts as vla-rl does.

For pi0 and pi0.5, with absolute actions and with openpi's delta actions: the openpi fixture export
imported by vla-rl, fine-tuned (SFT and Flow-SDE policy-gradient updates), and written back as an
openpi export; ``openpi_export_actions.py`` loads it with openpi's code (strict ``load_model``) and runs
the fixture's raw batch through openpi's LIBERO pipeline with the fixture's noise. Its actions must
equal the fine-tuned vla-rl policy's within 1e-4, and its loss (same noise and time) vla-rl's SFT loss.

Needs an openpi checkout (``OPENPI_DIR``) and a python that runs openpi (``OPENPI_PYTHON``, see
docs/guide/openpi_export.md); skips without them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policies" / "flow"))
from openpi_export_steps import FIXTURES, actions, fine_tune, import_export, reference, sft_loss  # noqa: E402

from vla_rl.policies.lerobot_export import export_lerobot  # noqa: E402

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-4
MOVED = 1e-2
"""The updates move vla-rl's actions by more than this, so the check is not the fixture's again."""


@pytest.mark.parametrize("delta", [False, True], ids=["absolute", "delta"])
@pytest.mark.parametrize("policy_type", ["pi0", "pi05"])
def test_openpi_acts_as_vla_rl_on_the_fine_tuned_export(
    policy_type: str, delta: bool, openpi_dir: Path, openpi_python: Path, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    arrays = reference(policy_type)
    policy = import_export(policy_type, delta=delta)
    fine_tune(policy, arrays)
    ours = actions(policy, arrays).numpy()
    fixture_actions = arrays["delta_actions" if delta else "actions"]
    assert float(np.abs(ours - fixture_actions).max()) > MOVED
    out = export_lerobot(policy, tmp_path / "export", folder_format="openpi")

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "JAX_PLATFORMS": "cpu", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    command = [
        str(openpi_python),
        str(HERE / "openpi_export_actions.py"),
        *("--openpi", str(openpi_dir), "--type", policy_type, "--folder", str(out)),
        *(
            "--reference",
            str(FIXTURES / policy_type / "reference.npz"),
            "--out",
            str(tmp_path / "openpi.npz"),
        ),
        *(["--delta"] if delta else []),
    ]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    with np.load(tmp_path / "openpi.npz") as theirs:
        difference = float(np.abs(theirs["actions"] - ours).max())
        their_loss = float(theirs["loss_per_entry"][..., : ours.shape[-1]].mean())
    loss_difference = abs(their_loss - sft_loss(policy, arrays))
    kind = "delta" if delta else "absolute"
    print(f"{policy_type} {kind}: max |openpi - vla-rl| actions {difference:.3g}, loss {loss_difference:.3g}")
    assert difference < TOLERANCE
    assert loss_difference < TOLERANCE
