"""Simulator backends (listed by name in ``vla_rl.envs.registry.BACKENDS``).

Importing this package only sets MuJoCo's and Mesa's rendering variables; no simulator loads."""

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
