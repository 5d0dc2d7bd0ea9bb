"""Tiny observations and token VLA policies shared by the VLA tests."""

from __future__ import annotations

import torch

from vla_rl.policies.registry import build_chunk_policy
from vla_rl.policies.vla.base_vla import TokenVLABase

INSTRUCTIONS = ("put the red cube on the blue pad", "pick up the cube", "move the gripper to the target")
PROPRIO_DIM = 5


def make_obs(batch: int, seed: int = 0, image_px: int = 32) -> dict:
    """Random images/proprio; instructions of different lengths so that prompts are padded."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "rgb_front": torch.randint(
            0, 256, (batch, image_px, image_px, 3), dtype=torch.uint8, generator=generator
        ),
        "proprio": torch.randn(batch, PROPRIO_DIM, generator=generator),
        "instruction": [INSTRUCTIONS[index % len(INSTRUCTIONS)] for index in range(batch)],
    }


def repeat_first(obs: dict, times: int) -> dict:
    """``times`` copies of the first observation of ``obs``."""
    repeated = {
        key: value[:1].expand(times, *value.shape[1:]).clone()
        for key, value in obs.items()
        if key != "instruction"
    }
    repeated["instruction"] = [obs["instruction"][0]] * times
    return repeated


def make_policy(family: str, seed: int = 0, **overrides: object) -> TokenVLABase:
    torch.manual_seed(seed)
    values: dict[str, object] = {
        "chunk_len": 2,
        "action_dim": 3,
        "use_proprio": True,
        "proprio_dim": PROPRIO_DIM,
    }
    values.update(overrides)
    return build_chunk_policy(family, **values).eval()


def sharpen(policy: TokenVLABase, gain: float) -> None:
    """Scale the final norm so that logits (and their differences) grow: peaked distributions."""
    norm = policy.vlm.model.language_model.norm
    with torch.no_grad():
        norm.weight.fill_(gain - 1.0)  # Gemma's RMSNorm multiplies by (1 + weight)
