"""The backends the conformance suite runs against (imported by its ``conftest.py`` and tests).

Each case names a backend, a task of it and the few settings the suite needs. A backend that cannot
run on this machine (missing extra, no GPU, missing assets) is skipped with the reason its
registration gives, so the same tests run unchanged where its runtime exists.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vla_rl.envs.config import EnvConfig

if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "egl")

NUM_ENVS = 3
EPISODE_STEPS = 4
"""Time limit given to every case, so that episodes end (and autoreset) within a few steps."""


@dataclass(frozen=True)
class BackendCase:
    id: str
    backend: str
    task: str
    cameras: tuple[str, ...] = ()
    image_size: int = 32
    options: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    randomized: bool = True
    """Different reset seeds give different initial observations."""
    instruction_varies: bool = False
    """Different reset seeds can give different instruction strings (language-conditioned tasks)."""
    upright: Callable[[np.ndarray], bool] | None = None
    """Optional probe: True when one ``[H, W, 3]`` camera image is the right way up."""

    def config(self, **overrides: Any) -> EnvConfig:
        cfg = EnvConfig(
            backend=self.backend,
            task=self.task,
            num_envs=NUM_ENVS,
            max_episode_steps=EPISODE_STEPS,
            cameras=list(self.cameras),
            image_size=self.image_size,
            num_threads=1,
            device=self.device,
            options=dict(self.options),
        )
        return dataclasses.replace(cfg, **overrides)


def table_below_sky(image: np.ndarray) -> bool:
    """The toolkit's MuJoCo scenes seen from the front camera: the lower half of the image holds
    the (bright, textured) table and arm, the upper half the darker, plain background."""
    height = image.shape[0]
    top, bottom = image[: height // 4].astype(float), image[-height // 4 :].astype(float)
    return bottom.std() + bottom.mean() > top.std() + top.mean()


CASES = [
    BackendCase("mujoco-push", "mujoco", "push", cameras=("front", "wrist"), upright=table_below_sky),
    BackendCase("mujoco-pick_place", "mujoco", "pick_place", instruction_varies=True),
    BackendCase(
        "mujoco_warp-push", "mujoco_warp", "push", cameras=("front", "wrist"), upright=table_below_sky
    ),
    BackendCase("mujoco_warp-pick_place", "mujoco_warp", "pick_place", instruction_varies=True),
    BackendCase(  # corner camera: the light floor fills the top of the image, the dark table stand the bottom
        "metaworld-reach",
        "metaworld",
        "reach-v3",
        cameras=("corner",),
        upright=lambda image: image[: len(image) // 4].mean() > image[-len(image) // 4 :].mean(),
    ),
    BackendCase("maniskill-PickCube", "maniskill", "PickCube-v1", cameras=("base_camera",), device="cuda"),
    BackendCase("isaaclab-lift", "isaaclab", "Isaac-Lift-Cube-Franka-v0", device="cuda"),
    BackendCase(  # wrist camera: the gripper's dark fingers fill the bottom of the view
        "libero-spatial",
        "libero",
        "libero_spatial/0",
        cameras=("robot0_eye_in_hand", "agentview"),
        options={"workers": 2},  # the three worlds in two worker processes
        upright=lambda image: image[: len(image) // 4].mean() > image[-len(image) // 4 :].mean(),
    ),
]
