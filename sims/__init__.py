"""Simulator backends. Importing this package registers them (cheaply: no simulator import)."""

import os


def headless_mujoco_gl() -> str:
    """MuJoCo's OpenGL backend without a display: EGL where its library is installed, else
    ``disable`` (``import mujoco`` with ``MUJOCO_GL=egl`` and no libEGL fails inside PyOpenGL, which
    would stop state-only training on machines without it, such as bare GPU containers)."""
    import ctypes.util

    return "egl" if ctypes.util.find_library("EGL") else "disable"


if not os.environ.get("DISPLAY") and "MUJOCO_GL" not in os.environ:
    # MuJoCo picks its OpenGL backend when first imported.
    os.environ["MUJOCO_GL"] = headless_mujoco_gl()
# Mesa's software rasteriser (llvmpipe) splits each frame across its own threads by default. Our
# frames are tiny and every env thread renders its own worlds, so that split costs more in
# hand-offs than it gains: rasterising in the calling thread renders ~1.4x more frames per second
# (benchmarks.render_speed). Read when the first GL context is created.
os.environ.setdefault("LP_NUM_THREADS", "0")

from vla_rl.sims.isaaclab import backend as _isaaclab_backend  # noqa: E402, F401
from vla_rl.sims.libero import backend as _libero_backend  # noqa: E402, F401
from vla_rl.sims.maniskill import backend as _maniskill_backend  # noqa: E402, F401
from vla_rl.sims.metaworld import backend as _metaworld_backend  # noqa: E402, F401
from vla_rl.sims.mujoco import backend as _mujoco_backend  # noqa: E402, F401
from vla_rl.sims.mujoco_warp import backend as _mujoco_warp_backend  # noqa: E402, F401
