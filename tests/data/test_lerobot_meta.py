"""The meta files and parquet columns of a tiny dataset, checked against hand-written expectations."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from vla_rl.data import LOSSLESS_VIDEO, LeRobotDataset, write_dataset
from vla_rl.data.episode import Episode

VIDEO_INFO = {
    "video.fps": 20.0,
    "video.height": 16,
    "video.width": 16,
    "video.channels": 3,
    "video.codec": "h264",
    "video.pix_fmt": "rgb24",
    "video.is_depth_map": False,
    "has_audio": False,
}


def _episodes() -> list[Episode]:
    grey = np.full((3, 16, 16, 3), 51, np.uint8)
    first = Episode(
        images={"front": grey},
        proprio=np.array([[0, 1], [2, 3], [4, 8]], np.float32),
        actions=np.array([[1], [0], [-1]], np.float32),
        instruction="push the cube onto the target",
        success=True,
        rewards=np.array([0.0, 0.5, 1.0], np.float32),
        success_per_step=np.array([False, True, True]),
    )
    second = Episode(
        images={"front": np.zeros((2, 16, 16, 3), np.uint8)},
        proprio=np.zeros((2, 2), np.float32),
        actions=np.zeros((2, 1), np.float32),
        instruction="reach the red target",
        success=False,
        rewards=np.zeros(2, np.float32),
        success_per_step=np.array([False, False]),
    )
    return [first, second]


@pytest.fixture
def dataset_root(tmp_path: Path) -> Path:
    names = {"observation.state": ["x", "y"], "action": ["push"]}
    write_dataset(
        tmp_path / "ds",
        _episodes(),
        fps=20.0,
        codebase_version="v2.1",
        robot_type="panda",
        video=LOSSLESS_VIDEO,
        feature_names=names,
    )
    return tmp_path / "ds"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_info_json(dataset_root: Path) -> None:
    scalar = {"shape": [1], "names": None}
    assert json.loads((dataset_root / "meta" / "info.json").read_text()) == {
        "codebase_version": "v2.1",
        "robot_type": "panda",
        "total_episodes": 2,
        "total_frames": 5,
        "total_tasks": 2,
        "total_videos": 2,
        "total_chunks": 1,
        "chunks_size": 1000,
        "fps": 20.0,
        "splits": {"train": "0:2"},
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
        "features": {
            "observation.images.front": {
                "dtype": "video",
                "shape": [16, 16, 3],
                "names": ["height", "width", "channels"],
                "info": VIDEO_INFO,
            },
            "observation.state": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
            "action": {"dtype": "float32", "shape": [1], "names": ["push"]},
            "timestamp": {"dtype": "float32", **scalar},
            "frame_index": {"dtype": "int64", **scalar},
            "episode_index": {"dtype": "int64", **scalar},
            "index": {"dtype": "int64", **scalar},
            "task_index": {"dtype": "int64", **scalar},
            "next.reward": {"dtype": "float32", **scalar},
            "next.done": {"dtype": "bool", **scalar},
            "next.success": {"dtype": "bool", **scalar},
        },
    }


def test_episodes_and_tasks_jsonl(dataset_root: Path) -> None:
    assert _jsonl(dataset_root / "meta" / "episodes.jsonl") == [
        {"episode_index": 0, "tasks": ["push the cube onto the target"], "length": 3, "success": True},
        {"episode_index": 1, "tasks": ["reach the red target"], "length": 2, "success": False},
    ]
    assert _jsonl(dataset_root / "meta" / "tasks.jsonl") == [
        {"task_index": 0, "task": "push the cube onto the target"},
        {"task_index": 1, "task": "reach the red target"},
    ]


def test_files_sit_where_lerobot_puts_them(dataset_root: Path) -> None:
    files = sorted(str(p.relative_to(dataset_root)) for p in dataset_root.rglob("*") if p.is_file())
    assert files == [
        "data/chunk-000/episode_000000.parquet",
        "data/chunk-000/episode_000001.parquet",
        "meta/episodes.jsonl",
        "meta/episodes_stats.jsonl",
        "meta/info.json",
        "meta/tasks.jsonl",
        "videos/chunk-000/observation.images.front/episode_000000.mp4",
        "videos/chunk-000/observation.images.front/episode_000001.mp4",
    ]


def test_episode_stats_by_hand(dataset_root: Path) -> None:
    rows = _jsonl(dataset_root / "meta" / "episodes_stats.jsonl")
    assert [row["episode_index"] for row in rows] == [0, 1]
    stats = rows[0]["stats"]
    assert stats["observation.state"] == {
        "min": [0.0, 1.0],
        "max": [4.0, 8.0],
        "mean": [2.0, 4.0],
        "std": pytest.approx([np.sqrt(8 / 3), np.sqrt(26 / 3)], rel=1e-12),
        "count": [3],
    }
    assert stats["action"] == {
        "min": [-1.0],
        "max": [1.0],
        "mean": [0.0],
        "std": pytest.approx([np.sqrt(2 / 3)], rel=1e-12),
        "count": [3],
    }
    assert stats["next.reward"]["mean"] == [0.5]
    assert stats["next.success"]["mean"] == pytest.approx([2 / 3])
    assert stats["next.done"] == {
        "min": [0.0],
        "max": [1.0],
        "mean": pytest.approx([1 / 3]),
        "std": pytest.approx([np.sqrt(2) / 3]),
        "count": [3],
    }
    assert stats["timestamp"]["max"] == pytest.approx([0.1], rel=1e-6)
    # grey level 51 everywhere: 0.2 in every channel, no spread; shapes [3, 1, 1] as LeRobot stores images
    assert stats["observation.images.front"] == {
        "min": [[[0.2]], [[0.2]], [[0.2]]],
        "max": [[[0.2]], [[0.2]], [[0.2]]],
        "mean": [[[pytest.approx(0.2)]], [[pytest.approx(0.2)]], [[pytest.approx(0.2)]]],
        "std": [[[pytest.approx(0.0, abs=1e-12)]]] * 3,
        "count": [3],
    }
    second = rows[1]["stats"]
    assert second["index"] == {"min": [3.0], "max": [4.0], "mean": [3.5], "std": [0.5], "count": [2]}
    assert second["episode_index"]["mean"] == [1.0]
    np.testing.assert_allclose(LeRobotDataset(dataset_root).episode_stats(1)["index"]["mean"], [3.5])


def test_parquet_columns(dataset_root: Path) -> None:
    table = pq.read_table(dataset_root / "data" / "chunk-000" / "episode_000001.parquet")
    assert table.column_names == [
        "observation.state",
        "action",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
        "next.reward",
        "next.done",
        "next.success",
    ]
    columns = table.to_pydict()
    assert columns["index"] == [3, 4]
    assert columns["episode_index"] == [1, 1]
    assert columns["frame_index"] == [0, 1]
    assert columns["task_index"] == [1, 1]
    assert columns["timestamp"] == pytest.approx([0.0, 0.05])
    assert columns["next.done"] == [False, True]
    assert columns["observation.state"] == [[0.0, 0.0], [0.0, 0.0]]
    assert str(table.schema.field("observation.state").type) == "fixed_size_list<element: float>[2]"
