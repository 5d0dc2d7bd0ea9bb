"""A LeRobot pi0 folder loaded by vla-rl against LeRobot 0.4 itself.

The fixture ``tests/fixtures/lerobot/pi0`` was written by ``tests/lerobot/make_pi_fixtures.py`` in the
LeRobot venv (with openpi's transformers files): LeRobot's ``PI0Policy`` at reduced width, saved by its
``save_pretrained`` with its processors, and its outputs for a raw observation batch: the action chunk
of ``predict_action_chunk`` through its pre- and post-processor for a given initial noise, and the
flow-matching loss of ``forward`` for a given noise and time. Here the same folder goes through
``Pi0Policy.from_pretrained`` (the path of ``policy.init_from``) and the same raw batch through our own
preprocessing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.config import ConfigError
from vla_rl.policies.flow.pi0 import Pi0Policy

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot" / "pi0"
TOLERANCE = 1e-4
"""float32 parity with the reference (the issue's bound)."""


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE / "reference.npz") as arrays:
        return dict(arrays)


@pytest.fixture(scope="module")
def policy() -> Pi0Policy:
    return Pi0Policy.from_pretrained(str(FIXTURE / "policy"), tokenizer_dir=str(FIXTURE / "tokenizer")).eval()


def raw_observation(reference: dict[str, np.ndarray]) -> dict[str, object]:
    """The reference's raw batch in our observation layout (uint8 HWC frames, state, instructions)."""
    return {
        "rgb_front": reference["rgb_front"],
        "rgb_wrist": reference["rgb_wrist"],
        "proprio": torch.as_tensor(reference["state"]),
        "instruction": [str(text) for text in reference["instructions"]],
    }


def test_folder_settings_are_read(policy: Pi0Policy) -> None:
    assert policy.cfg.camera_keys == ["front", "wrist"]
    assert (policy.action_dim, policy.chunk_len, policy.num_steps) == (7, 10, 10)
    assert policy.model.config.max_action_dim == 32


def test_prompt_and_state_equal_lerobot_preprocessor(
    policy: Pi0Policy, reference: dict[str, np.ndarray]
) -> None:
    inputs = policy.prepare_inputs(raw_observation(reference))
    width = reference["lang_tokens"].shape[1]
    np.testing.assert_array_equal(inputs.input_ids[:, -width:].numpy(), reference["lang_tokens"])
    np.testing.assert_array_equal(inputs.attention_mask[:, -width:].numpy(), reference["lang_mask"])
    np.testing.assert_allclose(inputs.state[:, :8].numpy(), reference["normalized_state"], rtol=0, atol=1e-6)
    assert not inputs.state[:, 8:].any()


def test_action_chunk_equals_lerobot(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> None:
    actions = policy.predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))
    assert actions.shape == reference["actions"].shape
    difference = float(np.abs(actions.numpy() - reference["actions"]).max())
    print(f"pi0 action chunk: max |vla-rl - LeRobot| = {difference:.3g}")
    assert difference < TOLERANCE


def test_flow_matching_loss_equals_lerobot(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> None:
    batch, chunk = reference["loss_actions"].shape[:2]
    with torch.no_grad():
        output = policy.sft_loss(
            raw_observation(reference),
            torch.as_tensor(reference["loss_actions"]),
            torch.ones(batch, chunk, dtype=torch.bool),
            noise=torch.as_tensor(reference["loss_noise"]),
            time=torch.as_tensor(reference["loss_time"]),
        )
    difference = abs(float(output.loss) - float(reference["loss"]))
    print(f"pi0 flow-matching loss: {float(output.loss):.7f} vs LeRobot {float(reference['loss']):.7f}")
    assert difference < TOLERANCE


def test_saved_import_keeps_lerobot_preprocessing(
    policy: Pi0Policy, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    """An RL checkpoint of an imported policy preprocesses as the folder did, without the folder."""
    policy.save_pretrained(str(tmp_path / "saved"))
    reloaded = Pi0Policy.from_pretrained(str(tmp_path / "saved")).eval()
    assert reloaded.cfg.lerobot == policy.cfg.lerobot
    obs, noise = raw_observation(reference), torch.as_tensor(reference["noise"])
    torch.testing.assert_close(
        reloaded.predict_action_chunk(obs, noise), policy.predict_action_chunk(obs, noise)
    )


def test_folder_without_tokenizer_needs_tokenizer_dir(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE / "policy", tmp_path / "policy")
    with pytest.raises(ConfigError, match="policy.tokenizer_dir"):
        Pi0Policy.from_pretrained(str(tmp_path / "policy"))


def test_tokenizer_inside_the_folder_is_used(tmp_path: Path, reference: dict[str, np.ndarray]) -> None:
    shutil.copytree(FIXTURE / "policy", tmp_path / "policy")
    shutil.copytree(FIXTURE / "tokenizer", tmp_path / "policy" / "tokenizer")
    policy = Pi0Policy.from_pretrained(str(tmp_path / "policy"))
    width = reference["lang_tokens"].shape[1]
    ids = policy.prepare_inputs(raw_observation(reference)).input_ids[:, -width:]
    np.testing.assert_array_equal(ids.numpy(), reference["lang_tokens"])
