"""Small hand-made episodes shared by the dataset tests."""

from __future__ import annotations

import numpy as np

from vla_rl.data.episode import Episode


def random_episode(
    rng: np.random.Generator,
    length: int,
    instruction: str,
    image_size: int = 16,
    cameras: tuple[str, ...] = ("front",),
    success: bool = True,
) -> Episode:
    """An episode with random images, state, privileged state, actions, rewards and an extra column."""
    return Episode(
        images={
            camera: rng.integers(0, 256, (length, image_size, image_size, 3), dtype=np.uint8)
            for camera in cameras
        },
        proprio=rng.normal(size=(length, 5)).astype(np.float32),
        actions=rng.uniform(-1, 1, (length, 4)).astype(np.float32),
        instruction=instruction,
        success=success,
        rewards=rng.random(length).astype(np.float32),
        privileged=rng.normal(size=(length, 3)).astype(np.float32),
        success_per_step=np.arange(length) >= length - 2 if success else np.zeros(length, bool),
        extras={"expert_action": rng.uniform(-1, 1, (length, 4)).astype(np.float32)},
    )


def smooth_frames(length: int, size: int) -> np.ndarray:
    """Gradient images that lossy codecs reproduce closely (noise would not compress)."""
    y, x = np.mgrid[0:size, 0:size]
    frames = [np.stack([x * 4 + t * 3, y * 4, np.full_like(x, 40 + 10 * t)], axis=-1) for t in range(length)]
    return np.clip(np.stack(frames), 0, 255).astype(np.uint8)
