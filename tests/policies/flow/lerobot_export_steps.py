"""Shared by the export tests: the LeRobot pi0 / pi0.5 fixtures imported, and a few updates on them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi05 import Pi05Policy
from vla_rl.policies.lora import LoraSettings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot"
FAMILIES = {"pi0": Pi0Policy, "pi05": Pi05Policy}
"""LeRobot policy type -> the family that imports it."""
LORA = LoraSettings(rank=4, alpha=8.0)
LEARNING_RATE = 1e-2
"""Large for these tiny models, so that a few updates move the actions well past the tolerance."""


def import_fixture(policy_type: str) -> Pi0Policy:
    """The fixture folder through ``from_pretrained`` (the path of ``policy.init_from``)."""
    fixture = FIXTURES / policy_type
    return FAMILIES[policy_type].from_pretrained(
        str(fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer")
    )


def load_reference(policy_type: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / policy_type / "reference.npz") as arrays:
        return dict(arrays)


def raw_observation(reference: dict[str, np.ndarray]) -> dict[str, object]:
    """The reference's raw batch in our observation layout (uint8 HWC frames, state, instructions)."""
    return {
        "rgb_front": reference["rgb_front"],
        "rgb_wrist": reference["rgb_wrist"],
        "proprio": torch.as_tensor(reference["state"]),
        "instruction": [str(text) for text in reference["instructions"]],
    }


def actions(policy: Pi0Policy, reference: dict[str, np.ndarray]) -> torch.Tensor:
    """The denoised chunk for the reference's observation and initial noise, in the robot's units."""
    return policy.eval().predict_action_chunk(raw_observation(reference), torch.as_tensor(reference["noise"]))


def fine_tune(policy: Pi0Policy, reference: dict[str, np.ndarray], lora: bool, updates: int = 2) -> None:
    """``updates`` rounds of one SFT step (flow-matching loss on the reference's action batch) and one
    policy-gradient step (Flow-SDE: the sampled chain's log-probability times a fixed advantage), with
    Adam on what trains (with ``lora``: adapters added first, the base weights frozen)."""
    if lora:
        policy.add_lora(LORA)
    policy.set_exploration(exploration="flow_sde")
    parameters = [p for p in policy.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=LEARNING_RATE)
    obs = raw_observation(reference)
    batch, chunk = reference["loss_actions"].shape[:2]
    advantage = torch.tensor([1.0, -1.0])
    torch.manual_seed(0)
    for _ in range(updates):
        policy.train()
        loss = policy.sft_loss(
            obs, torch.as_tensor(reference["loss_actions"]), torch.ones(batch, chunk, dtype=torch.bool)
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            step = policy.sample(obs, temperature=1.0)
        evaluation = policy.evaluate(obs, step.sample_info, temperature=1.0)
        optimizer.zero_grad()
        (-(evaluation.log_prob * advantage).mean()).backward()
        optimizer.step()
    policy.eval()
