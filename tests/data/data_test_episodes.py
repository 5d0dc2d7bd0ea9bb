"""Small hand-made episodes shared by the dataset tests, and the check that one read back is the same."""

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


def three_episodes(seed: int, cameras: tuple[str, ...] = ("front", "wrist")) -> list[Episode]:
    """Three random episodes (5, 7 and 4 frames) of two tasks; the second one fails."""
    rng = np.random.default_rng(seed)
    return [
        random_episode(rng, 5, "put the red cube on the blue pad", cameras=cameras),
        random_episode(rng, 7, "pick up the cube", cameras=cameras, success=False),
        random_episode(rng, 4, "put the red cube on the blue pad", cameras=cameras),
    ]


def smooth_frames(length: int, size: int) -> np.ndarray:
    """Gradient images that lossy codecs reproduce closely (noise would not compress)."""
    y, x = np.mgrid[0:size, 0:size]
    frames = [np.stack([x * 4 + t * 3, y * 4, np.full_like(x, 40 + 10 * t)], axis=-1) for t in range(length)]
    return np.clip(np.stack(frames), 0, 255).astype(np.uint8)


def assert_same_episode(expected: Episode, got: Episode) -> None:
    """``got`` (read back) holds what ``expected`` did: instruction, label, images and every per-step array
    with its dtype."""
    assert got.instruction == expected.instruction
    assert got.success == expected.success
    assert sorted(got.images) == sorted(expected.images)
    for camera in expected.images:
        np.testing.assert_array_equal(got.images[camera], expected.images[camera])
    for name in ("proprio", "actions", "rewards", "privileged", "success_per_step"):
        value = getattr(got, name)
        assert value.dtype == getattr(expected, name).dtype, name
        np.testing.assert_array_equal(value, getattr(expected, name), err_msg=name)
    assert sorted(got.extras) == sorted(expected.extras)
    for key in expected.extras:
        np.testing.assert_array_equal(got.extras[key], expected.extras[key])
