"""ManiSkill's batched observation dict -> the toolkit's flat observation dict.

ManiSkill (obs modes ``state_dict``, ``rgb+state_dict``, ``rgb+segmentation``) returns nested
torch tensors with the batch first::

    {"agent": {"qpos": [N, J], "qvel": [N, J], ...},
     "extra": {"tcp_pose": [N, 7], "obj_pose": [N, 7], "is_grasped": [N], ...},
     "sensor_param": {...},
     "sensor_data": {"<camera>": {"rgb": uint8 [N, H, W, 3], ...}}}

Images come upright (row 0 is the top of the picture), so they are only resized, never flipped.
Every tensor returned here is a fresh copy: ManiSkill reuses its buffers, and a final observation
must survive the reset that follows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from vla_rl.envs.base import Observation


@dataclass(frozen=True)
class ObservationLayout:
    cameras: tuple[str, ...]
    image_size: int
    """Height and width of the returned images in pixels."""
    privileged: bool
    """Include ``privileged``: the flattened ``agent`` and ``extra`` dicts (ManiSkill's own
    ``state`` observation), which hold object poses only in obs modes with ``state``."""


def proprio(raw: dict[str, Any]) -> torch.Tensor:
    """Joint positions then joint velocities of the robot, float32 [N, 2J]."""
    agent = raw["agent"]
    return torch.cat([agent["qpos"].float(), agent["qvel"].float()], dim=-1)


def flatten_batched(tree: Any, num_envs: int) -> torch.Tensor:
    """Concatenate every tensor of a nested dict (insertion order, batch first) as float32 [N, D];
    the same order ManiSkill uses for its flat ``state`` observation. Booleans become 0/1."""
    if isinstance(tree, dict):
        parts = [flatten_batched(value, num_envs) for value in tree.values()]
        parts = [part for part in parts if part.shape[1] > 0]
        if not parts:
            return torch.zeros(num_envs, 0)
        device = parts[0].device
        return torch.cat([part.to(device) for part in parts], dim=1)
    return torch.as_tensor(tree).reshape(num_envs, -1).float()


def camera_rgb(raw: dict[str, Any], camera: str, image_size: int) -> torch.Tensor:
    """The camera's RGB image as uint8 [N, S, S, 3]; resized (bilinear, antialiased) when the
    simulator rendered it at another size."""
    sensors = raw.get("sensor_data", {})
    if camera not in sensors or "rgb" not in sensors[camera]:
        raise ValueError(
            f"config key 'env.cameras': the task has no RGB camera {camera!r}; it has {sorted(sensors)}"
        )
    rgb = sensors[camera]["rgb"][..., :3]
    if rgb.dtype != torch.uint8:
        rgb = (rgb.float().clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)
    if tuple(rgb.shape[1:3]) == (image_size, image_size):
        return rgb.clone()
    chw = rgb.permute(0, 3, 1, 2).float()
    resized = F.interpolate(chw, size=(image_size, image_size), mode="bilinear", antialias=True)
    return resized.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def map_observation(
    raw: dict[str, Any], layout: ObservationLayout, instructions: list[str], device: torch.device
) -> Observation:
    """The toolkit's observation of all worlds, on ``device``."""
    num_envs = len(instructions)
    obs: Observation = {"proprio": proprio(raw).to(device)}
    if layout.privileged:
        state = {"agent": raw["agent"], "extra": raw.get("extra", {})}
        obs["privileged"] = flatten_batched(state, num_envs).to(device)
    for camera in layout.cameras:
        obs[f"rgb_{camera}"] = camera_rgb(raw, camera, layout.image_size).to(device)
    obs["instruction"] = list(instructions)
    return obs
