"""The LeRobot side of the LIBERO-dataset SFT test; runs in .venv-lerobot (LeRobot 0.4), not the main venv.

    python lerobot_libero_dataset.py LAYOUT CAMERA_DTYPE SIZE ROOT OUT.npz

LeRobot's own writer (``LeRobotDataset.create`` + ``add_frame`` + ``save_episode`` + ``finalize``) writes
a small dataset with the features of LIBERO's LeRobot datasets into ROOT, then ``LeRobotDataset`` reads
every frame back. LAYOUT names the features:

* ``lerobot``: ``observation.images.image`` and ``observation.images.wrist_image`` (agent view and wrist
  camera), ``observation.state`` (8: end-effector position 3, axis-angle 3, finger joints 2) and
  ``action`` (7: end-effector deltas 6, gripper -1 open / +1 close), as the hub's LIBERO datasets
  (``lerobot/libero_*_image``) and ``LiberoProcessorStep`` (lerobot/processor/env_processor.py) name them;
* ``openpi``: ``image``, ``wrist_image``, ``state`` and ``actions``, as openpi's
  ``examples/libero/convert_libero_data_to_lerobot.py`` writes ``physical-intelligence/libero``.

CAMERA_DTYPE is ``image`` (PNG frames inside the parquet files, as those datasets store them) or
``video`` (mp4 files); SIZE x SIZE frames (LIBERO's are 256; AV1 video needs at least 64). fps 10, one
task string per episode, content random but seeded. OUT.npz holds ``frames/<key>`` stacked over the
frames in index order (camera frames uint8 [N, H, W, 3]), ``frames/task`` and the dataset's counts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO_ID = "local/libero"
FPS = 10
LENGTHS = (5, 7, 4)
TASKS = (
    "pick up the black bowl between the plate and the ramekin and place it on the plate",
    "open the top drawer and put the bowl inside",
    "pick up the black bowl between the plate and the ramekin and place it on the plate",
)
LAYOUTS = {
    "lerobot": {
        "agent": "observation.images.image",
        "wrist": "observation.images.wrist_image",
        "state": "observation.state",
        "action": "action",
    },
    "openpi": {"agent": "image", "wrist": "wrist_image", "state": "state", "action": "actions"},
}
"""Layout -> the feature key of the agent-view camera, the wrist camera, the state and the action."""


def _frames(values: np.ndarray) -> np.ndarray:
    """LeRobot's float [0, 1] channel-first camera frames as uint8 [..., H, W, 3]."""
    return np.round(np.moveaxis(values, -3, -1) * 255.0).astype(np.uint8)


def _camera_frames(rng: np.random.Generator, length: int, size: int, camera_dtype: str) -> np.ndarray:
    """Random frames for PNG (lossless); smooth ones with a random offset for lossy AV1 video."""
    if camera_dtype == "image":
        return rng.integers(0, 256, (length, size, size, 3), dtype=np.uint8)
    y, x = np.mgrid[0:size, 0:size]
    offset = int(rng.integers(0, 120))
    frames = [
        np.stack([x * 2 + 9 * t + offset, y * 2 + offset, np.full_like(x, 40 + 15 * t)], axis=-1)
        for t in range(length)
    ]
    return np.clip(np.stack(frames), 0, 255).astype(np.uint8)


def write(layout: str, camera_dtype: str, size: int, root: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    keys = LAYOUTS[layout]
    camera = {"dtype": camera_dtype, "shape": (size, size, 3), "names": ["height", "width", "channel"]}
    features = {
        keys["agent"]: camera,
        keys["wrist"]: camera,
        keys["state"]: {"dtype": "float32", "shape": (8,), "names": ["state"]},
        keys["action"]: {"dtype": "float32", "shape": (7,), "names": ["actions"]},
    }
    dataset = LeRobotDataset.create(
        REPO_ID,
        fps=FPS,
        root=root,
        features=features,
        robot_type="panda",
        use_videos=camera_dtype == "video",
    )
    rng = np.random.default_rng(85)
    for length, task in zip(LENGTHS, TASKS, strict=True):
        agent = _camera_frames(rng, length, size, camera_dtype)
        wrist = _camera_frames(rng, length, size, camera_dtype)
        state = rng.normal(scale=0.3, size=(length, 8)).astype(np.float32)
        action = np.concatenate(
            [rng.uniform(-1, 1, (length, 6)), np.sign(rng.uniform(-1, 1, (length, 1)))], axis=1
        ).astype(np.float32)
        for t in range(length):
            dataset.add_frame(
                {
                    keys["agent"]: agent[t],
                    keys["wrist"]: wrist[t],
                    keys["state"]: state[t],
                    keys["action"]: action[t],
                    "task": task,
                }
            )
        dataset.save_episode()
    dataset.finalize()


def read(root: Path, out: Path) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset(REPO_ID, root=root, video_backend="pyav")
    cameras = set(dataset.meta.camera_keys)
    items = [dataset[i] for i in range(len(dataset))]
    arrays: dict[str, np.ndarray] = {
        "num_frames": np.array(len(dataset)),
        "num_episodes": np.array(dataset.num_episodes),
        "fps": np.array(dataset.fps),
        "codebase_version": np.array(dataset.meta.info["codebase_version"]),
        "frames/task": np.array([item["task"] for item in items]),
    }
    for key in items[0]:
        if key == "task":
            continue
        values = np.stack([item[key].numpy() for item in items])
        arrays[f"frames/{key}"] = _frames(values) if key in cameras else values
    np.savez(out, **arrays)


if __name__ == "__main__":
    layout, camera_dtype, size, root, out = sys.argv[1:]
    write(layout, camera_dtype, int(size), Path(root))
    read(Path(root), Path(out))
