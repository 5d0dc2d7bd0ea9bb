"""The LeRobot side of the dataset interop tests; runs in .venv-lerobot (LeRobot 0.4), never in the main venv.

    python lerobot_datasets.py read ROOT OUT.npz        LeRobotDataset reads ROOT: every frame, the tasks,
                                                         meta/stats.json, stats LeRobot recomputes from the
                                                         frames it read, and windows of frames as training
                                                         asks for them (delta_timestamps)
    python lerobot_datasets.py write SPEC.npz ROOT OUT.npz
                                                         LeRobotDataset.create + add_frame + save_episode +
                                                         finalize writes the episodes in SPEC, then reads ROOT
    python lerobot_datasets.py convert ROOT OUT.npz      LeRobot's v2.1 -> v3.0 converter on the v2.1 dataset
                                                         at ROOT (in place), then reads ROOT

Arrays go to an .npz (``frames/<key>`` stacked over the dataset's frames, camera frames as uint8
[N, H, W, 3]; ``stats/<feature>/<stat>`` as stored; ``recomputed/<feature>/<stat>`` from LeRobot's
``compute_episode_stats`` and ``aggregate_stats``; ``windows/<key>`` and ``windows/<key>_is_pad`` for
every frame with ``WINDOW_FRAMES`` offsets: actions ahead, camera frames behind) for the main venv's
tests to compare.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

REPO_ID = "local/interop"
WINDOW_FRAMES = {"action": [0, 1, 2], "camera": [-1, 0]}
"""Frame offsets of the windows read with ``delta_timestamps``: an action chunk, two camera frames."""


def _frames(values: np.ndarray) -> np.ndarray:
    """LeRobot's float [0, 1] channel-first camera frames as the uint8 [..., H, W, 3] decoded."""
    return np.round(np.moveaxis(values, -3, -1) * 255.0).astype(np.uint8)


def read_windows(root: Path, arrays: dict[str, np.ndarray]) -> None:
    from lerobot.datasets.lerobot_dataset import LeRobotDataset, LeRobotDatasetMetadata

    meta = LeRobotDatasetMetadata(REPO_ID, root=root)
    offsets = {
        "action": WINDOW_FRAMES["action"],
        **{key: WINDOW_FRAMES["camera"] for key in meta.camera_keys},
    }
    delta = {key: [k / meta.fps for k in frames] for key, frames in offsets.items()}
    dataset = LeRobotDataset(REPO_ID, root=root, video_backend="pyav", delta_timestamps=delta)
    items = [dataset[i] for i in range(len(dataset))]
    for key in offsets:
        values = np.stack([item[key].numpy() for item in items])
        arrays[f"windows/{key}"] = _frames(values) if key in meta.camera_keys else values
        arrays[f"windows/{key}_is_pad"] = np.stack([item[f"{key}_is_pad"].numpy() for item in items])


def read(root: Path, out: Path) -> None:
    from lerobot.datasets.compute_stats import aggregate_stats, compute_episode_stats
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    dataset = LeRobotDataset(REPO_ID, root=root, video_backend="pyav")
    features = dataset.meta.features
    cameras = set(dataset.meta.camera_keys)
    items = [dataset[i] for i in range(len(dataset))]
    arrays: dict[str, np.ndarray] = {
        "num_frames": np.array(len(dataset)),
        "num_episodes": np.array(dataset.num_episodes),
        "fps": np.array(dataset.fps),
        "tasks": np.array([str(dataset.meta.tasks.index[i]) for i in range(len(dataset.meta.tasks))]),
        "task_indices": np.array(dataset.meta.tasks["task_index"].tolist()),
        "frames/task": np.array([item["task"] for item in items]),
    }
    for key in items[0]:
        if key == "task":
            continue
        values = np.stack([item[key].numpy() for item in items])
        if key in cameras:
            values = _frames(values)
        arrays[f"frames/{key}"] = values
    for feature, stats in dataset.meta.stats.items():
        for name, value in stats.items():
            arrays[f"stats/{feature}/{name}"] = np.asarray(value)
    episode_index = arrays["frames/episode_index"]
    per_episode = []
    with tempfile.TemporaryDirectory() as scratch:
        for episode in np.unique(episode_index):
            rows = np.flatnonzero(episode_index == episode)
            data: dict[str, object] = {}
            for key in features:
                if key in cameras:  # LeRobot computes image stats from frame files
                    paths = []
                    for row in rows:
                        path = Path(scratch) / f"{key}-{row:06d}.png"
                        Image.fromarray(arrays[f"frames/{key}"][row]).save(path)
                        paths.append(str(path))
                    data[key] = paths
                elif f"frames/{key}" in arrays:
                    data[key] = arrays[f"frames/{key}"][rows]
            per_episode.append(compute_episode_stats(data, features))
    for feature, stats in aggregate_stats(per_episode).items():
        for name, value in stats.items():
            arrays[f"recomputed/{feature}/{name}"] = np.asarray(value)
    read_windows(root, arrays)
    np.savez(out, **arrays)


def write(spec_path: Path, root: Path, out: Path) -> None:
    """SPEC holds ``fps``, ``lengths`` [E], ``tasks`` [E] and per-frame ``image`` [N, H, W, 3] uint8,
    ``state`` [N, S], ``action`` [N, A] float32 and ``reward`` [N] float32, episodes back to back, and
    ``camera_dtype``: ``video`` (mp4 files) or ``image`` (PNG frames inside the parquet files)."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    spec = np.load(spec_path)
    image, state, action = spec["image"], spec["state"], spec["action"]
    camera_dtype = str(spec["camera_dtype"])
    features = {
        "observation.images.front": {
            "dtype": camera_dtype,
            "shape": tuple(image.shape[1:]),
            "names": ["height", "width", "channels"],
        },
        "observation.state": {"dtype": "float32", "shape": (state.shape[1],), "names": None},
        "action": {"dtype": "float32", "shape": (action.shape[1],), "names": None},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
    }
    dataset = LeRobotDataset.create(
        REPO_ID,
        fps=int(spec["fps"]),
        root=root,
        features=features,
        robot_type="sim",
        use_videos=camera_dtype == "video",
    )
    row = 0
    for length, task in zip(spec["lengths"], spec["tasks"], strict=True):
        for _ in range(int(length)):
            dataset.add_frame(
                {
                    "observation.images.front": image[row],
                    "observation.state": state[row],
                    "action": action[row],
                    "next.reward": spec["reward"][row : row + 1],
                    "task": str(task),
                }
            )
            row += 1
        dataset.save_episode()
    dataset.finalize()
    read(root, out)


def convert(root: Path, out: Path) -> None:
    from lerobot.datasets.v30.convert_dataset_v21_to_v30 import convert_dataset

    # the converter finds the dataset at root.parent / repo_id and leaves the v2.1 one beside it
    convert_dataset(root.name, root=root.parent, push_to_hub=False)
    read(root, out)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    {"read": read, "write": write, "convert": convert}[command](*map(Path, args))
