"""Tiny observations and flow policies shared by the flow tests."""

from __future__ import annotations

import torch

from vla_rl.policies.registry import build_chunk_policy

INSTRUCTIONS = ("put the red cube on the blue pad", "pick up the cube", "move the gripper to the target")
PROPRIO_DIM = 5
IMAGE_PX = 32


def make_obs(batch: int, seed: int = 0, image_px: int = IMAGE_PX) -> dict:
    """Random images/proprio; instructions of different lengths so that prompts are padded."""
    generator = torch.Generator().manual_seed(seed)
    return {
        "rgb_front": torch.randint(
            0, 256, (batch, image_px, image_px, 3), dtype=torch.uint8, generator=generator
        ),
        "proprio": torch.randn(batch, PROPRIO_DIM, generator=generator),
        "instruction": [INSTRUCTIONS[index % len(INSTRUCTIONS)] for index in range(batch)],
    }


def make_pi0(seed: int = 0, **overrides: object):
    torch.manual_seed(seed)
    values: dict[str, object] = {"chunk_len": 3, "action_dim": 4, "proprio_dim": PROPRIO_DIM}
    values.update(overrides)
    return build_chunk_policy("pi0", **values).eval()


def make_flow_mlp(seed: int = 0, **overrides: object):
    torch.manual_seed(seed)
    values: dict[str, object] = {
        "chunk_len": 2,
        "action_dim": 3,
        "proprio_dim": PROPRIO_DIM,
        "hidden_sizes": [32],
    }
    values.update(overrides)
    return build_chunk_policy("flow_mlp", **values).eval()
