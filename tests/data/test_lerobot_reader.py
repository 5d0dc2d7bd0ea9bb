"""Reading datasets written by other tools (subsets of columns, other features) and clear errors."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from data_test_episodes import random_episode

from vla_rl.data import LOSSLESS_VIDEO, LeRobotDataset, write_dataset
from vla_rl.data.video import write_video


def _write_info(root: Path, features: dict, **extra: object) -> None:
    (root / "meta").mkdir(parents=True, exist_ok=True)
    info = {"codebase_version": "v2.1", "fps": 10, "chunks_size": 1000, "features": features, **extra}
    info.setdefault("data_path", "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet")
    (root / "meta" / "info.json").write_text(json.dumps(info))


def _png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    iio.imwrite(buffer, image, extension=".png")
    return buffer.getvalue()


def test_reads_a_foreign_dataset_with_a_subset_of_columns(tmp_path: Path) -> None:
    """Variable-length list columns, an ``image`` feature stored as PNG bytes, an extra state
    column, rows out of order, no ``next.*`` or ``task_index`` columns and no ``tasks.jsonl``."""
    root = tmp_path / "foreign"
    images = np.random.default_rng(0).integers(0, 256, (3, 8, 8, 3), dtype=np.uint8)
    _write_info(
        root,
        {
            "observation.image": {
                "dtype": "image",
                "shape": [8, 8, 3],
                "names": ["height", "width", "channel"],
            },
            "observation.state": {"dtype": "float64", "shape": [2], "names": {"motors": ["a", "b"]}},
            "observation.environment_state": {"dtype": "float32", "shape": [4], "names": None},
            "action": {"dtype": "float32", "shape": [2], "names": None},
            "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        },
        total_episodes=1,
    )
    order = [2, 0, 1]
    table = pa.table(
        {
            "observation.image": pa.array([{"bytes": _png(images[i]), "path": None} for i in order]),
            "observation.state": pa.array([[float(i), 10.0 + i] for i in order], type=pa.list_(pa.float64())),
            "observation.environment_state": pa.array([[i] * 4 for i in order], type=pa.list_(pa.float32())),
            "action": pa.array([[i, -i] for i in order], type=pa.list_(pa.float32())),
            "frame_index": pa.array(order, type=pa.int64()),
        }
    )
    (root / "data" / "chunk-000").mkdir(parents=True)
    pq.write_table(table, root / "data" / "chunk-000" / "episode_000000.parquet")
    (root / "meta" / "episodes.jsonl").write_text(
        json.dumps({"episode_index": 0, "tasks": ["fold"], "length": 3})
    )

    dataset = LeRobotDataset(root)
    assert dataset.num_episodes == 1 and dataset.num_frames == 3 and dataset.tasks == {}
    assert dataset.cameras == {"image": "observation.image"}
    episode = dataset.episode(0)
    assert episode.instruction == "fold"
    assert episode.success is True
    assert episode.rewards is None and episode.privileged is None and episode.success_per_step is None
    assert episode.proprio.dtype == np.float32
    np.testing.assert_array_equal(episode.proprio, [[0, 10], [1, 11], [2, 12]])
    np.testing.assert_array_equal(episode.actions, [[0, 0], [1, -1], [2, -2]])
    np.testing.assert_array_equal(episode.images["image"], images)
    np.testing.assert_array_equal(
        episode.extras["observation.environment_state"], np.repeat([[0], [1], [2]], 4, 1)
    )
    np.testing.assert_allclose(dataset.action_stats()["mean"], [1.0, -1.0])


def test_reads_actions_only(tmp_path: Path) -> None:
    root = tmp_path / "actions_only"
    _write_info(root, {"action": {"dtype": "float32", "shape": [1], "names": None}}, total_episodes=2)
    for index in range(2):
        path = root / "data" / "chunk-000" / f"episode_{index:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"action": pa.array([0.5, index], type=pa.float32())}), path)
    episodes = list(LeRobotDataset(root).episodes())
    assert [episode.proprio.shape for episode in episodes] == [(2, 0), (2, 0)]
    np.testing.assert_array_equal(episodes[1].actions, [[0.5], [1.0]])
    assert episodes[0].instruction == "" and episodes[0].images == {}


def test_missing_directory_and_info_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="dataset directory .*nowhere does not exist"):
        LeRobotDataset(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty/meta/info\.json does not exist"):
        LeRobotDataset(tmp_path / "empty")


def test_invalid_info_is_reported_with_its_file(tmp_path: Path) -> None:
    (tmp_path / "bad" / "meta").mkdir(parents=True)
    (tmp_path / "bad" / "meta" / "info.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"bad/meta/info\.json is not valid JSON"):
        LeRobotDataset(tmp_path / "bad")
    _write_info(tmp_path / "v3", {}, codebase_version="v3.0")
    with pytest.raises(ValueError, match=r"codebase_version 'v3.0' is not supported"):
        LeRobotDataset(tmp_path / "v3")
    (tmp_path / "nofeatures" / "meta").mkdir(parents=True)
    (tmp_path / "nofeatures" / "meta" / "info.json").write_text(json.dumps({"fps": 10}))
    with pytest.raises(ValueError, match="no 'features' entry"):
        LeRobotDataset(tmp_path / "nofeatures")


def test_missing_files_and_columns_are_named(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    root = write_dataset(
        tmp_path / "ds",
        [random_episode(rng, 3, "a"), random_episode(rng, 3, "b")],
        20.0,
        codebase_version="v2.1",
    )
    (root / "data" / "chunk-000" / "episode_000001.parquet").unlink()
    dataset = LeRobotDataset(root)
    with pytest.raises(FileNotFoundError, match=r"episode_000001\.parquet does not exist"):
        dataset.episode(1)
    with pytest.raises(IndexError, match="out of range"):
        dataset.episode(2)
    (root / "videos" / "chunk-000" / "observation.images.front" / "episode_000000.mp4").unlink()
    with pytest.raises(FileNotFoundError, match=r"episode_000000\.mp4 does not exist"):
        dataset.episode(0)
    path = root / "data" / "chunk-000" / "episode_000000.parquet"
    pq.write_table(pq.read_table(path).drop_columns(["action"]), path)
    with pytest.raises(ValueError, match="has no 'action' column"):
        LeRobotDataset(root).episode(0)


def test_video_with_the_wrong_frame_count_is_named(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    root = write_dataset(
        tmp_path / "ds", [random_episode(rng, 4, "a")], 20.0, video=LOSSLESS_VIDEO, codebase_version="v2.1"
    )
    video = root / "videos" / "chunk-000" / "observation.images.front" / "episode_000000.mp4"
    write_video(video, np.zeros((3, 16, 16, 3), np.uint8), 20.0, LOSSLESS_VIDEO)
    with pytest.raises(
        ValueError, match=r"episode_000000\.mp4: 3 frames for camera 'front', the episode has 4"
    ):
        LeRobotDataset(root).episode(0)


def test_torn_meta_line_is_an_error_for_readers(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    root = write_dataset(tmp_path / "ds", [random_episode(rng, 2, "a")], 20.0, codebase_version="v2.1")
    with open(root / "meta" / "episodes.jsonl", "a") as file:
        file.write('{"episode_index": 1, "le')
    with pytest.raises(ValueError, match=r"episodes\.jsonl line 2 is not valid JSON"):
        len(LeRobotDataset(root))
    shutil.rmtree(root / "meta")
    with pytest.raises(FileNotFoundError, match="info.json"):
        LeRobotDataset(root)
