"""A real MuJoCo env with a camera and a small learned reward model, shared by the reward tests."""

from __future__ import annotations

import torch

from vla_rl.envs import EnvConfig, make_env
from vla_rl.rewards.learned import LearnedRewardConfig, LearnedRewardModel

IMAGE_PX = 48
"""Smallest comfortable size for the model's strided convolutions; keeps rendering cheap."""


def make_camera_env(num_envs: int = 2, task: str = "reach", cameras: tuple[str, ...] = ("front",)):
    return make_env(
        EnvConfig(task=task, num_envs=num_envs, cameras=list(cameras), image_size=IMAGE_PX, num_threads=1)
    )


def make_learned_model(cameras: tuple[str, ...] = ("front",), seed: int = 0, score: str = "mean"):
    """A randomly initialised model; its head is scaled up so scores differ visibly between frames."""
    torch.manual_seed(seed)
    model = LearnedRewardModel(LearnedRewardConfig(cameras=list(cameras), image_size=IMAGE_PX), score)
    with torch.no_grad():
        model.heads[-1].weight.mul_(300.0)
    return model.eval()


def random_frames(batch: int, views: int = 1, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    shape = (batch, IMAGE_PX, IMAGE_PX, 3) if views == 1 else (batch, views, IMAGE_PX, IMAGE_PX, 3)
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator)
