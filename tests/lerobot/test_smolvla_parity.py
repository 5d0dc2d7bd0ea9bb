"""SmolVLA against LeRobot 0.4, live: LeRobot builds a tiny SmolVLA from a local SmolVLM backbone,
saves it as a user's policy folder and records ``predict_action_chunk`` (through its own pre- and
post-processor) and ``forward``'s flow-matching losses for a raw observation batch with fixed noise
and time (``smolvla_reference.py``); vla-rl loads the folder by policy name, as ``policy.init_from``
does, and must give the same numbers from the same raw inputs (float32, within 1e-4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.config.structured import ConfigError
from vla_rl.policies.flow.smolvla_inputs import build_inputs
from vla_rl.policies.registry import load_chunk_policy

TOLERANCE = 1e-4
"""float32 parity bound on actions and losses (the issue's)."""
SENSITIVITY = 1e-2
"""A changed input must move the actions by more than this: the parity check can then fail."""
HUB_BACKBONE = "HuggingFaceTB/SmolVLM2-500M-Video-Instruct"


VARIANTS = ("interleaved", "skipping")
"""The reference script's model variants (its ``VARIANTS``)."""


@pytest.fixture(scope="module", params=VARIANTS)
def reference(request, run_lerobot, tmp_path_factory) -> tuple[Path, dict[str, np.ndarray]]:
    """(folder with ``policy/`` and ``vlm/``, the reference arrays) of one model variant."""
    out = tmp_path_factory.mktemp(f"smolvla_{request.param}")
    arrays = run_lerobot("smolvla_reference.py", out, request.param, out=out / "reference.npz")
    return out, arrays


def observation(arrays: dict[str, np.ndarray]) -> dict[str, object]:
    """The raw batch as an env gives it to vla-rl (uint8 HWC cameras, state, instructions)."""
    return {
        "rgb_top": arrays["image_top"],
        "rgb_wrist": arrays["image_wrist"],
        "proprio": arrays["state"],
        "instruction": [str(text) for text in arrays["instructions"]],
    }


def test_smolvla_actions_and_loss_equal_lerobot(reference) -> None:
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    obs = observation(arrays)

    inputs = build_inputs(obs, policy.folder, policy.arch, policy.cfg, policy.tokenizer, policy.device)
    np.testing.assert_array_equal(
        inputs.tokens.numpy(), arrays["lang_tokens"]
    )  # newline, truncation, padding
    np.testing.assert_array_equal(inputs.token_mask.numpy(), arrays["lang_mask"])

    actions = policy.predict_chunk(obs, torch.from_numpy(arrays["noise"])).numpy()
    assert actions.shape == arrays["actions"].shape
    action_error = float(np.abs(actions - arrays["actions"]).max())

    with torch.no_grad():
        losses = policy.flow_losses(
            obs,
            torch.from_numpy(arrays["raw_actions"]),
            torch.from_numpy(arrays["loss_noise"]),
            torch.from_numpy(arrays["loss_time"]),
        ).numpy()
    loss_entry_error = float(np.abs(losses - arrays["losses"]).max())
    loss_error = abs(float(losses.mean()) - float(arrays["loss"]))
    print(
        f"smolvla vs LeRobot: max |action diff| {action_error:.3g} (actions up to "
        f"{np.abs(arrays['actions']).max():.3g}), max |loss entry diff| {loss_entry_error:.3g}, "
        f"|loss diff| {loss_error:.3g} (loss {float(arrays['loss']):.4g})"
    )
    assert action_error <= TOLERANCE
    assert loss_entry_error <= TOLERANCE
    assert loss_error <= TOLERANCE


@pytest.mark.parametrize("change", ["image", "instruction", "state"])
def test_smolvla_actions_depend_on_each_input(reference, change: str) -> None:
    """Each input moves the actions by far more than the tolerance, so a preprocessing difference
    in any of them would fail the parity test above."""
    out, arrays = reference
    policy = load_chunk_policy("smolvla", out / "policy").eval()
    obs = observation(arrays)
    if change == "image":
        obs["rgb_wrist"] = obs["rgb_wrist"][:, ::-1].copy()
    elif change == "instruction":
        obs["instruction"] = [text.replace("red", "blue") for text in obs["instruction"]]
    else:
        obs["proprio"] = obs["proprio"] + 0.5
    actions = policy.predict_chunk(obs, torch.from_numpy(arrays["noise"])).numpy()
    assert float(np.abs(actions - arrays["actions"]).max()) > SENSITIVITY


def test_smolvla_backbone_must_be_local(reference, tmp_path: Path) -> None:
    """A user's folder names the hub backbone: without a local copy of its config and tokenizer the
    load is a ConfigError saying where to put it; with one in ``vlm/`` (or ``vlm_dir``) it loads."""
    out, arrays = reference
    folder = tmp_path / "user_policy"
    shutil.copytree(out / "policy", folder)
    config = json.loads((folder / "config.json").read_text())
    config["vlm_model_name"] = HUB_BACKBONE
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="vlm"):
        load_chunk_policy("smolvla", folder)
    shutil.copytree(out / "vlm", folder / "vlm")
    policy = load_chunk_policy("smolvla", folder).eval()
    actions = policy.predict_chunk(observation(arrays), torch.from_numpy(arrays["noise"])).numpy()
    assert float(np.abs(actions - arrays["actions"]).max()) <= TOLERANCE
