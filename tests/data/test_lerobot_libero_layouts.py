"""LIBERO's LeRobot datasets in the v2.x layout (written here with pyarrow as those tools write them,
frames as PNG inside the parquet files): the hub's names (``observation.images.image``,
``observation.state``, ``action``) and openpi's (``image``, ``wrist_image``, ``state``, ``actions``:
``physical-intelligence/libero``, codebase v2.0) read into the same episodes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vla_rl.data import LeRobotDataset
from vla_rl.data.lerobot_format import open_dataset
from vla_rl.training.sft.demonstrations import load_demonstrations

LAYOUT_KEYS = {
    "lerobot": ("observation.images.image", "observation.images.wrist_image", "observation.state", "action"),
    "openpi": ("image", "wrist_image", "state", "actions"),
}
"""Per layout: the feature key of the agent view, the wrist camera, the state and the action."""
TASKS = ["put the bowl on the plate", "open the drawer"]
LENGTHS = [4, 3]


def _png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    iio.imwrite(buffer, image, extension=".png")
    return buffer.getvalue()


def _write_libero_v2(root: Path, layout: str, version: str) -> dict[str, np.ndarray]:
    """Two episodes in ``layout`` (8 x 8 frames); returns the per-frame arrays written, by role."""
    agent_key, wrist_key, state_key, action_key = LAYOUT_KEYS[layout]
    rng = np.random.default_rng(3)
    total = sum(LENGTHS)
    written = {
        "image": rng.integers(0, 256, (total, 8, 8, 3), dtype=np.uint8),
        "wrist_image": rng.integers(0, 256, (total, 8, 8, 3), dtype=np.uint8),
        "state": rng.normal(size=(total, 8)).astype(np.float32),
        "action": rng.uniform(-1, 1, (total, 7)).astype(np.float32),
    }
    camera = {"dtype": "image", "shape": [8, 8, 3], "names": ["height", "width", "channel"]}
    features = {
        agent_key: camera,
        wrist_key: camera,
        state_key: {"dtype": "float32", "shape": [8], "names": ["state"]},
        action_key: {"dtype": "float32", "shape": [7], "names": ["actions"]},
        **{key: {"dtype": "int64", "shape": [1], "names": None} for key in ("frame_index", "task_index")},
    }
    info = {
        "codebase_version": version,
        "robot_type": "panda",
        "fps": 10,
        "chunks_size": 1000,
        "total_episodes": len(LENGTHS),
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "features": features,
    }
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info))
    (root / "meta" / "tasks.jsonl").write_text(
        "".join(json.dumps({"task_index": i, "task": task}) + "\n" for i, task in enumerate(TASKS))
    )
    (root / "meta" / "episodes.jsonl").write_text(
        "".join(
            json.dumps({"episode_index": i, "tasks": [TASKS[i]], "length": n}) + "\n"
            for i, n in enumerate(LENGTHS)
        )
    )
    (root / "data" / "chunk-000").mkdir(parents=True)
    starts = np.cumsum([0, *LENGTHS])
    for index, length in enumerate(LENGTHS):
        rows = range(starts[index], starts[index + 1])
        table = pa.table(
            {
                agent_key: pa.array([{"bytes": _png(written["image"][r]), "path": None} for r in rows]),
                wrist_key: pa.array([{"bytes": _png(written["wrist_image"][r]), "path": None} for r in rows]),
                state_key: pa.array(written["state"][rows].tolist(), type=pa.list_(pa.float32(), 8)),
                action_key: pa.array(written["action"][rows].tolist(), type=pa.list_(pa.float32(), 7)),
                "frame_index": pa.array(range(length), type=pa.int64()),
                "task_index": pa.array([index] * length, type=pa.int64()),
            }
        )
        pq.write_table(table, root / "data" / "chunk-000" / f"episode_{index:06d}.parquet")
    return written


@pytest.mark.parametrize(("layout", "version"), [("lerobot", "v2.1"), ("openpi", "v2.0")])
def test_libero_layouts_read_into_the_same_episodes(tmp_path: Path, layout: str, version: str) -> None:
    root = tmp_path / layout
    written = _write_libero_v2(root, layout, version)
    dataset = open_dataset(root)
    assert isinstance(dataset, LeRobotDataset)
    agent_key, wrist_key, state_key, action_key = LAYOUT_KEYS[layout]
    assert dataset.cameras == {"image": agent_key, "wrist_image": wrist_key}
    assert (dataset.state_key, dataset.action_key) == (state_key, action_key)
    episodes = load_demonstrations(root)
    assert [len(e) for e in episodes] == LENGTHS
    assert [e.instruction for e in episodes] == TASKS
    for camera in ("image", "wrist_image"):
        np.testing.assert_array_equal(np.concatenate([e.images[camera] for e in episodes]), written[camera])
    np.testing.assert_array_equal(np.concatenate([e.proprio for e in episodes]), written["state"])
    np.testing.assert_array_equal(np.concatenate([e.actions for e in episodes]), written["action"])
    assert all(e.extras == {} for e in episodes)
    np.testing.assert_allclose(dataset.action_stats()["mean"], written["action"].mean(0), rtol=1e-6)
    np.testing.assert_allclose(dataset.state_stats()["max"], written["state"].max(0))


def test_the_standard_names_win_over_openpis(tmp_path: Path) -> None:
    """A dataset with both ``action`` and ``actions`` columns learns ``action``; ``actions`` is an extra."""
    root = tmp_path / "both"
    _write_libero_v2(root, "lerobot", "v2.1")
    info = json.loads((root / "meta" / "info.json").read_text())
    info["features"]["actions"] = {"dtype": "float32", "shape": [2], "names": None}
    (root / "meta" / "info.json").write_text(json.dumps(info))
    path = root / "data" / "chunk-000" / "episode_000000.parquet"
    table = pq.read_table(path)
    pq.write_table(table.append_column("actions", pa.array([[1.0, 2.0]] * len(table))), path)
    episode = LeRobotDataset(root).episode(0)
    assert episode.actions.shape == (LENGTHS[0], 7)
    np.testing.assert_array_equal(episode.extras["actions"], [[1.0, 2.0]] * LENGTHS[0])
