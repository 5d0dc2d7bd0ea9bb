"""What the SmolVLA tests share: the reference batch as an env gives it to vla-rl, and LeRobot's
actions for a folder (``smolvla_lerobot_actions.py`` in LeRobot's venv)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np


def observation(arrays: dict[str, np.ndarray]) -> dict[str, object]:
    """The raw batch as an env gives it to vla-rl (uint8 HWC cameras, state, instructions)."""
    return {
        "rgb_top": arrays["image_top"],
        "rgb_wrist": arrays["image_wrist"],
        "proprio": arrays["state"],
        "instruction": [str(text) for text in arrays["instructions"]],
    }


def lerobot_actions(
    run_lerobot: Callable[..., dict[str, np.ndarray]], folder: Path, reference: Path, work: Path
) -> np.ndarray:
    """LeRobot's action chunk for the raw batch and noise of ``reference`` (``reference.npz``) from
    the SmolVLA policy folder ``folder``, loaded by LeRobot's ``from_pretrained`` and processors."""
    out = work / "lerobot.npz"
    return run_lerobot("smolvla_lerobot_actions.py", folder, reference, out, out=out)["actions"]
