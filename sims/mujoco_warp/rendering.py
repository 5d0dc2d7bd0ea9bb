"""Batch rendering of every world's cameras with MuJoCo Warp's ray-traced renderer."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp


class WarpBatchRenderer:
    """Renders ``camera_ids`` of all worlds in one launch and converts them to uint8 images.

    Images are ``[N, H, W, 3]`` with row 0 at the top, like the OpenGL renderer of the CPU backend.
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        num_worlds: int,
        camera_ids: Sequence[int],
        image_size: int,
        device: str,
        shadows: bool = False,
    ) -> None:
        self.device = device
        self.camera_ids = list(camera_ids)
        with wp.ScopedDevice(device):
            self.context = mjw.create_render_context(
                model,
                nworld=num_worlds,
                cam_res=(image_size, image_size),
                render_rgb=True,
                cam_active=self.camera_ids,
                use_shadows=shadows,
            )
            self._rgb = [
                wp.zeros((num_worlds, image_size, image_size), dtype=wp.vec3) for _ in self.camera_ids
            ]
        self._rgb_views = [wp.to_torch(buffer) for buffer in self._rgb]

    def render(self, model: mjw.Model, data: mjw.Data, out: Sequence[np.ndarray]) -> None:
        """Render every camera of every world into ``out`` (one uint8 [N, H, W, 3] per camera)."""
        for images, rendered in zip(out, self.render_tensors(model, data), strict=True):
            images[:] = rendered.cpu().numpy()

    def render_tensors(self, model: mjw.Model, data: mjw.Data) -> list[torch.Tensor]:
        """Every camera of every world as uint8 [N, H, W, 3] tensors on the warp device."""
        with wp.ScopedDevice(self.device):
            mjw.refit_bvh(model, data, self.context)
            mjw.render(model, data, self.context)
            for index, buffer in enumerate(self._rgb):
                mjw.get_rgb(self.context, index, buffer)
            wp.synchronize_device(self.device)
        return [(view.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8) for view in self._rgb_views]
