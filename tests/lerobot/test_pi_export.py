"""LeRobot itself loads what ``vla-rl export --format lerobot`` writes and acts as vla-rl does.

For pi0 and pi0.5: the LeRobot fixture folder imported by vla-rl and exported (no update in between),
and exported again after SFT and policy-gradient updates (full fine-tuning; LoRA merged on export;
a run with 4 instead of the folder's 10 denoising steps, written as ``num_inference_steps``; and
LoRA kept apart, where LeRobot runs the base weights without the adapters, as the folder's
re-import by vla-rl does);
``lerobot_pi_actions.py`` loads each export with LeRobot's ``from_pretrained`` and processors in
.venv-lerobot and records ``predict_action_chunk`` for the fixture's raw batch and initial noise.
The actions must equal vla-rl's own within 1e-4 (and the first export's LeRobot's recorded ones).

LeRobot's pi0 / pi0.5 need openpi's ``transformers_replace`` files: give an openpi checkout in
``OPENPI_DIR``; without it this check skips (the export's files are compared with the fixture's in
tests/policies/flow/test_lerobot_export.py, which runs everywhere).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policies" / "flow"))
from lerobot_export_steps import (  # noqa: E402
    FIXTURES,
    actions,
    fine_tune,
    import_fixture,
    load_reference,
    reach_folder,
    reach_like_batch,
    tiny_rl_run,
)

from vla_rl.policies.lerobot_export import export_lerobot  # noqa: E402
from vla_rl.policies.registry import load_chunk_policy  # noqa: E402

TOLERANCE = 1e-4
"""float32 parity with the reference (the issue's bound)."""
MOVED = 1e-2
"""The updates move vla-rl's actions by more than this, so the check after them is not the first one."""
ADAPTERS_MATTER = 1e-3
"""Leaving the adapters out changes the fine-tuned actions by more than this (ten times the bound)."""


@pytest.mark.parametrize("policy_type", ["pi0", "pi05"])
def test_lerobot_acts_as_vla_rl_on_the_exports(
    policy_type: str,
    openpi_dir: Path,
    run_lerobot: Callable[..., dict[str, np.ndarray]],
    tmp_path: Path,
) -> None:
    torch.set_num_threads(1)
    reference = load_reference(policy_type)
    cases = [
        "no update",
        "updated",
        "updated, LoRA merged",
        "updated, 4 denoising steps",
        "updated, LoRA kept",
    ]
    folders, ours = [], []
    for index, case in enumerate(cases):
        policy = import_fixture(policy_type)
        if case != "no update":
            fine_tune(policy, reference, lora="LoRA" in case)
        if "4 denoising steps" in case:
            policy.cfg.num_denoising_steps = 4
            policy.set_exploration()
        folder = export_lerobot(policy, tmp_path / f"export_{index}", keep_lora="kept" in case)
        folders.append(folder)
        if "kept" in case:
            # LeRobot reads model.safetensors only: the base weights and the projections that trained in
            # full, not the adapters; vla-rl's re-import of the folder ignores lora_adapter/ as well.
            fine_tuned = actions(policy, reference).numpy()
            policy = load_chunk_policy(policy_type, folder)
            assert float(np.abs(actions(policy, reference).numpy() - fine_tuned).max()) > ADAPTERS_MATTER
        ours.append(actions(policy, reference).numpy())
    for updated in ours[1:]:
        assert float(np.abs(updated - reference["actions"]).max()) > MOVED
    out = tmp_path / "lerobot_actions.npz"
    theirs = run_lerobot(
        "lerobot_pi_actions.py",
        "--openpi",
        openpi_dir,
        "--type",
        policy_type,
        "--tokenizer",
        folders[1] / "tokenizer",  # the export's own, written by transformers 5, read by LeRobot's 4.53
        "--inputs",
        FIXTURES / policy_type / "reference.npz",
        "--out",
        out,
        *folders,
        out=out,
    )
    for index, case in enumerate(cases):
        assert int(theirs[f"weights_differing_{index}"]) == 0, case
        assert int(theirs[f"weights_not_in_file_{index}"]) == 0, case
        difference = float(np.abs(theirs[f"actions_{index}"] - ours[index]).max())
        print(f"{policy_type} export ({case}): max |LeRobot - vla-rl| = {difference:.3g}")
        assert difference < TOLERANCE, case
    np.testing.assert_allclose(theirs["actions_0"], reference["actions"], rtol=0, atol=TOLERANCE)


@pytest.mark.parametrize(("policy_type", "lora"), [("pi0", False), ("pi05", True)], ids=["pi0", "pi05_lora"])
def test_lerobot_acts_as_the_rl_run_on_its_export(
    policy_type: str,
    lora: bool,
    openpi_dir: Path,
    run_lerobot: Callable[..., dict[str, np.ndarray]],
    tmp_path: Path,
) -> None:
    """``vla-rl train`` (one Flow-SDE PPO update on MuJoCo reach of the fixture cut to reach's widths),
    ``vla-rl export`` of the run folder, LeRobot's actions on it against the run's checkpoint's."""
    from vla_rl.cli import main

    torch.set_num_threads(1)
    folder = reach_folder(policy_type, tmp_path / "folder")
    run_dir = tmp_path / "run"
    assert main(tiny_rl_run(run_dir, folder, policy_type, lora)) == 0
    out = tmp_path / "exported"
    assert main(["export", "--format", "lerobot", str(run_dir), str(out)]) == 0
    batch = reach_like_batch()
    np.savez(tmp_path / "inputs.npz", **batch)
    checkpoint = load_chunk_policy(policy_type, run_dir / "checkpoints" / "iter_000001" / "policy")
    ours = actions(checkpoint, batch).numpy()
    before = actions(load_chunk_policy(policy_type, folder, str(FIXTURES / policy_type / "tokenizer")), batch)
    assert float(np.abs(ours - before.numpy()).max()) > 10 * TOLERANCE  # the update changed the actions
    result = tmp_path / "lerobot_actions.npz"
    theirs = run_lerobot(
        "lerobot_pi_actions.py",
        "--openpi",
        openpi_dir,
        "--type",
        policy_type,
        "--tokenizer",
        FIXTURES / policy_type / "tokenizer",
        "--inputs",
        tmp_path / "inputs.npz",
        "--out",
        result,
        out,
        out=result,
    )
    assert int(theirs["weights_differing_0"]) == 0 and int(theirs["weights_not_in_file_0"]) == 0
    difference = float(np.abs(theirs["actions_0"] - ours).max())
    how = " (LoRA merged)" if lora else ""
    print(f"{policy_type} RL run export{how}: max |LeRobot - vla-rl checkpoint| = {difference:.3g}")
    assert difference < TOLERANCE
