"""Simulator backends. Importing this package registers them (cheaply: no simulator import)."""

import os

if not os.environ.get("DISPLAY"):
    # Headless: MuJoCo picks its OpenGL backend when first imported; EGL needs no display.
    os.environ.setdefault("MUJOCO_GL", "egl")

from vla_rl.sims.mujoco import backend as _mujoco_backend  # noqa: E402, F401
