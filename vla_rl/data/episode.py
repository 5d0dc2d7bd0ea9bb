"""One recorded episode in memory, the unit that datasets store and SFT samples chunks from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class Episode:
    """Arrays of one episode, all with T rows (one per control step)."""

    images: dict[str, np.ndarray]
    """Camera name (``front``, ``wrist``) -> uint8 [T, H, W, 3]."""
    proprio: np.ndarray
    """float32 [T, P]: ``obs["proprio"]`` at each step."""
    actions: np.ndarray
    """float32 [T, A]: action taken at each step, normalised env units."""
    instruction: str
    """The episode's language instruction."""
    success: bool
    """Whether the episode ended in success."""
    rewards: np.ndarray | None = None
    """float32 [T] environment reward after each action, when recorded."""
    privileged: np.ndarray | None = None
    """float32 [T, K]: ``obs["privileged"]`` at each step, when recorded."""
    success_per_step: np.ndarray | None = None
    """bool [T]: success flag after each action, when recorded."""
    extras: dict[str, np.ndarray] = field(default_factory=dict)
    """Any other per-step arrays [T, ...]."""

    def __len__(self) -> int:
        return len(self.actions)


def env_observation(
    images: Mapping[str, np.ndarray], proprio: np.ndarray, privileged: np.ndarray | None = None
) -> dict[str, torch.Tensor]:
    """Recorded rows [N, ...] (an episode's, or steps gathered from several) under the env's
    observation keys: ``rgb_<camera>`` (as recorded), ``proprio`` and, where recorded, ``privileged``
    (float32). Arrays are shared where their type allows, not copied."""
    obs = {f"rgb_{camera}": torch.from_numpy(np.asarray(value)) for camera, value in images.items()}
    obs["proprio"] = torch.from_numpy(np.asarray(proprio, dtype=np.float32))
    if privileged is not None:
        obs["privileged"] = torch.from_numpy(np.asarray(privileged, dtype=np.float32))
    return obs
