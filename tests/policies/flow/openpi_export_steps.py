"""Shared by the openpi export tests: the openpi pi0 / pi0.5 fixtures imported, and a few updates on them."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch
from lerobot_export_steps import fine_tune_on

from vla_rl.policies.env_maps import EnvMaps
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi05 import Pi05Policy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "openpi"
FAMILIES = {"pi0": Pi0Policy, "pi05": Pi05Policy}
CAMERA_MAP = {"base_0_rgb": "base", "left_wrist_0_rgb": "wrist", "right_wrist_0_rgb": None}
"""The fixtures' LIBERO layout: base and left wrist cameras, the right wrist slot left out."""


def import_export(
    policy_type: str, folder: Path | None = None, delta: bool = False, **settings: object
) -> Pi0Policy:
    """An openpi export (the fixture's by default) through ``from_pretrained`` with ``settings``, with
    the camera map (and, with ``delta``, the fixture's delta-action mask)."""
    fixture = FIXTURES / policy_type
    if delta:
        settings["openpi_delta_action_mask"] = [bool(v) for v in reference(policy_type)["delta_action_mask"]]
    policy = FAMILIES[policy_type].from_pretrained(
        str(folder or fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer"), **settings
    )
    policy.set_env_maps(EnvMaps(camera_map=dict(CAMERA_MAP)))
    return policy.eval()


def copy_export(policy_type: str, tmp_path: Path) -> Path:
    """A copy of the fixture's export to change."""
    return Path(shutil.copytree(FIXTURES / policy_type / "policy", tmp_path / "export"))


def reference(policy_type: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / policy_type / "reference.npz") as arrays:
        return dict(arrays)


def observation(arrays: dict[str, np.ndarray]) -> dict[str, object]:
    """The reference's raw batch in our observation layout."""
    return {
        "rgb_base": arrays["rgb_base"],
        "rgb_wrist": arrays["rgb_wrist"],
        "proprio": torch.as_tensor(arrays["state"]),
        "instruction": [str(text) for text in arrays["instructions"]],
    }


def actions(policy: Pi0Policy, arrays: dict[str, np.ndarray]) -> torch.Tensor:
    return policy.eval().predict_action_chunk(observation(arrays), torch.as_tensor(arrays["noise"]))


def sft_loss(policy: Pi0Policy, arrays: dict[str, np.ndarray]) -> float:
    """The SFT loss on the reference's action batch with its noise and time."""
    batch, chunk = arrays["loss_actions"].shape[:2]
    with torch.no_grad():
        return float(
            policy.sft_loss(
                observation(arrays),
                torch.as_tensor(arrays["loss_actions"]),
                torch.ones(batch, chunk, dtype=torch.bool),
                noise=torch.as_tensor(arrays["loss_noise"]),
                time=torch.as_tensor(arrays["loss_time"]),
            ).loss
        )


def fine_tune(policy: Pi0Policy, arrays: dict[str, np.ndarray], updates: int = 2) -> None:
    """SFT and Flow-SDE policy-gradient steps on the reference's batch (``lerobot_export_steps``)."""
    fine_tune_on(policy, observation(arrays), arrays, lora=False, updates=updates)
