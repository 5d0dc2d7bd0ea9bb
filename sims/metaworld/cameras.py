"""Offscreen camera images of MetaWorld worlds, turned the right way up.

Several of MetaWorld's fixed cameras (``corner``, ``corner2``, ``corner3``, ``corner4``) are
defined with their image-up axis pointing below the horizon, so a plain render shows the scene
upside down (floor on top). A camera whose up axis has a negative world z-component is rotated by
180 degrees (rows and columns reversed), which gives the view a camera at the same place would
see held upright; ``topview``, ``behindGripper`` and ``gripperPOV`` are left as rendered.

Creating a renderer (an OpenGL context with MetaWorld's textures uploaded) costs about half a
second on a CPU, so worlds of one task share one: each world's scene is built from its own model
and data, then drawn with the shared context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np
from vla_rl.sims.mujoco.rendering import WorldRenderer

UP_AXIS_Z = 7
"""Index, in MuJoCo's row-major 3x3 ``cam_xmat``, of the world z-component of the camera's y (image
up) axis."""


def camera_is_upside_down(data: Any, camera_id: int) -> bool:
    """True when the camera's image-up axis points downwards in the world (``data`` after a forward pass)."""
    return bool(data.cam_xmat[camera_id][UP_AXIS_Z] < 0.0)


class TaskCameras:
    """Renders the named cameras of any world of one task into uint8 [H, W, 3] images."""

    def __init__(
        self,
        model: Any,
        data: Any,
        cameras: Sequence[str],
        image_size: int,
        shadows: bool = False,
        multisample: bool = False,
    ) -> None:
        self.camera_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, name) for name in cameras]
        unknown = [name for name, cid in zip(cameras, self.camera_ids, strict=True) if cid < 0]
        if unknown:
            known = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
            raise ValueError(
                f"config key 'env.cameras': unknown MetaWorld camera(s) {unknown}; known: {known}"
            )
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, image_size)
        model.vis.global_.offheight = max(model.vis.global_.offheight, image_size)
        model.vis.quality.offsamples = 4 if multisample else 0
        self.renderer = WorldRenderer(model, image_size, max_geom=10000, shadows=shadows)
        self.rotate = [camera_is_upside_down(data, cid) for cid in self.camera_ids]
        self.image_size = image_size

    def render(self, model: Any, data: Any) -> list[np.ndarray]:
        """One image per camera of the world ``(model, data)``, in the order the cameras were given."""
        images = []
        for camera_id, rotate in zip(self.camera_ids, self.rotate, strict=True):
            image = np.empty((self.image_size, self.image_size, 3), np.uint8)
            self.renderer.render(model, data, camera_id, image)
            images.append(image[::-1, ::-1] if rotate else image)
        return images

    def close(self) -> None:
        self.renderer.close()
