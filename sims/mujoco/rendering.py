"""Offscreen rendering of many worlds with one OpenGL context per thread."""

from __future__ import annotations

import os
import threading
import weakref

import mujoco
import numpy as np


class WorldRenderer:
    """Renders any world of a batch (all worlds share the model structure) at a fixed size:
    ``height`` by ``width`` pixels (square by default). MuJoCo keeps a camera's vertical field of view
    whatever the width, so a wider image shows more at the sides and its square centre is the
    square image.

    Must be created and used in the same thread (EGL contexts are not shared across threads).
    One thread may hold renderers of several environments (an environment with one worker
    renders on the calling thread, as does a second one built there for evaluation), so each
    ``render`` and ``close`` first makes its own context current: drawing through another
    environment's context, or a freed one, returns wrong pixels without an error. A renderer that
    is dropped without ``close`` is freed the same way when it is collected (see ``_free_gl``).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        height: int,
        width: int | None = None,
        max_geom: int = 1000,
        shadows: bool = True,
    ) -> None:
        width = height if width is None else width
        self.size_hw = (height, width)
        if not hasattr(mujoco, "GLContext"):
            raise RuntimeError(
                f"MuJoCo rendering is off (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}), so cameras cannot "
                "be rendered: install EGL (Debian: apt-get install libegl1) for headless rendering, or "
                "set MUJOCO_GL to a backend this machine has before starting"
            )
        self._context = mujoco.GLContext(width, height)
        self._context.make_current()
        self._scene = mujoco.MjvScene(model, maxgeom=max_geom)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows  # drawn where lights cast them
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self._mjr = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._mjr)
        self._viewport = mujoco.MjrRect(0, 0, width, height)
        self._flipped = np.empty((height, width, 3), dtype=np.uint8)
        self._free = weakref.finalize(self, _free_gl, self._context, self._mjr)

    def render(self, model: mujoco.MjModel, data: mujoco.MjData, camera_id: int, out: np.ndarray) -> None:
        """Render ``camera_id`` of one world into ``out`` (uint8 [H, W, 3])."""
        self._context.make_current()
        self._camera.fixedcamid = camera_id
        mujoco.mjv_updateScene(
            model, data, self._option, None, self._camera, mujoco.mjtCatBit.mjCAT_ALL, self._scene
        )
        mujoco.mjr_render(self._viewport, self._scene, self._mjr)
        mujoco.mjr_readPixels(self._flipped, None, self._viewport, self._mjr)
        out[:] = self._flipped[::-1]

    def close(self) -> None:
        self._free()


_NOT_FREED: list[tuple[object, mujoco.MjrContext]] = []
"""GL contexts that could not be made current when their renderer was freed, kept with their
MuJoCo render context so that its destructor never frees GL objects in another context."""


def _free_gl(context: object, mjr: mujoco.MjrContext) -> None:
    """Free ``mjr``'s GL objects with its own ``context`` current, then the context. GL object
    names are numbered per context, so freed in whichever context is current they would delete
    another renderer's objects of the same names and its frames would come back wrong."""
    try:
        context.make_current()
    except Exception:  # noqa: BLE001 - current in a thread that still runs, or EGL already shut down
        _NOT_FREED.append((context, mjr))
        return
    mjr.free()
    context.free()


class ThreadLocalRenderers(threading.local):
    """Lazily creates one ``WorldRenderer`` per calling thread (``threading.local`` gives each thread
    its own attributes, set by ``__init__`` with the same arguments on the thread's first use)."""

    def __init__(self, model: mujoco.MjModel, height: int, width: int) -> None:
        self._model = model
        self._size_hw = (height, width)
        self.renderer: WorldRenderer | None = None

    def get(self) -> WorldRenderer:
        if self.renderer is None:
            self.renderer = WorldRenderer(self._model, *self._size_hw)
        return self.renderer

    def close_current(self) -> None:
        """Close the calling thread's renderer, if it has one (a GL context must be released by the
        thread that owns it)."""
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None
