"""LeRobot v3.0 datasets: write Episodes, read them back, the layout's files, stats and resuming."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from data_test_episodes import assert_same_episode, random_episode, smooth_frames, three_episodes

from vla_rl.data import LOSSLESS_VIDEO, LeRobotDataset, write_dataset
from vla_rl.data.lerobot_format import dataset_writer, open_dataset
from vla_rl.data.lerobot_v3_reader import LeRobotV3Dataset
from vla_rl.data.lerobot_v3_stats import frame_stats
from vla_rl.data.lerobot_v3_writer import LeRobotV3Writer


def test_lossless_round_trip_and_layout(tmp_path: Path) -> None:
    episodes = three_episodes(0)
    root = write_dataset(
        tmp_path / "ds", episodes, fps=20.0, codebase_version="v3.0", robot_type="panda", video=LOSSLESS_VIDEO
    )
    dataset = open_dataset(root)
    assert isinstance(dataset, LeRobotV3Dataset)
    assert dataset.num_episodes == 3 and dataset.num_frames == 16 and dataset.fps == 20.0
    assert dataset.tasks == {0: "put the red cube on the blue pad", 1: "pick up the cube"}
    assert dataset.cameras == {"front": "observation.images.front", "wrist": "observation.images.wrist"}
    for expected, got in zip(episodes, dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    assert_same_episode(episodes[1], dataset.episode(-2))

    files = sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())
    assert files == [
        "data/chunk-000/file-000.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "meta/info.json",
        "meta/stats.json",
        "meta/tasks.parquet",
        "videos/observation.images.front/chunk-000/file-000.mp4",
        "videos/observation.images.wrist/chunk-000/file-000.mp4",
    ]
    info = dataset.info
    assert info["codebase_version"] == "v3.0" and info["total_frames"] == 16 and info["total_tasks"] == 2
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    table = pq.read_table(root / "meta/episodes/chunk-000/file-000.parquet")
    # 5, 7 and 4 frames at 20 fps, back to back in one data file and one video file per camera
    assert table.column("dataset_from_index").to_pylist() == [0, 5, 12]
    assert table.column("dataset_to_index").to_pylist() == [5, 12, 16]
    assert table.column("videos/observation.images.wrist/from_timestamp").to_pylist() == [0.0, 0.25, 0.6]
    assert table.column("videos/observation.images.wrist/to_timestamp").to_pylist() == [0.25, 0.6, 0.8]
    assert table.column("tasks").to_pylist() == [[e.instruction] for e in episodes]
    assert pq.read_table(root / "data/chunk-000/file-000.parquet").column("index").to_pylist() == list(
        range(16)
    )


def test_stats_per_episode_and_pooled(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    episodes = [random_episode(rng, 3, "a", cameras=()), random_episode(rng, 2, "b", cameras=())]
    episodes[0].actions = np.array([[0, 1], [2, 3], [4, 8]], np.float32)
    episodes[1].actions = np.array([[6, -1], [8, 0]], np.float32)
    episodes[0].extras = episodes[1].extras = {}
    dataset = LeRobotV3Dataset(write_dataset(tmp_path / "ds", episodes, fps=10.0, codebase_version="v3.0"))
    # episode 0, dim 0 (0 2 4): q50 is the ceil(1.5) = 2nd smallest, q90 the ceil(2.7) = 3rd
    first = dataset.episode_stats(0)["action"]
    np.testing.assert_array_equal(first["q50"], [2, 3])
    np.testing.assert_array_equal(first["q90"], [4, 8])
    np.testing.assert_array_equal(first["q01"], [0, 1])
    np.testing.assert_array_equal(dataset.episode_stats(1)["action"]["q50"], [6, -1])
    pooled = dataset.dataset_stats()["action"]
    np.testing.assert_allclose(pooled["mean"], [4.0, 2.2], rtol=1e-12)
    np.testing.assert_allclose(pooled["std"][0], np.sqrt(8.0), rtol=1e-12)
    np.testing.assert_array_equal(pooled["min"], [0, -1])
    np.testing.assert_array_equal(pooled["max"], [8, 8])
    assert pooled["count"].tolist() == [5]
    # quantiles pooled as count-weighted means: (3 * 2 + 2 * 6) / 5 and (3 * 3 + 2 * -1) / 5
    np.testing.assert_allclose(pooled["q50"], [3.6, 1.4], rtol=1e-12)
    assert dataset.dataset_stats()["timestamp"]["max"].tolist() == [pytest.approx(0.2)]


def test_frame_stats_quantiles_of_pixels() -> None:
    frames = np.zeros((1, 2, 2, 3), np.uint8)
    frames[0, :, :, 0] = [[0, 51], [102, 255]]
    frames[0, :, :, 1] = 255
    stats = frame_stats(frames)
    # channel 0, four pixels: q10 -> 1st smallest (0), q50 -> 2nd (51), q90 -> 4th (255)
    assert stats["q10"].shape == (3, 1, 1)
    np.testing.assert_allclose(stats["q10"][:, 0, 0], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(stats["q50"][:, 0, 0], [0.2, 1.0, 0.0])
    np.testing.assert_allclose(stats["q90"][:, 0, 0], [1.0, 1.0, 0.0])
    np.testing.assert_allclose(stats["mean"][0, 0, 0], (0 + 51 + 102 + 255) / 4 / 255)


def test_size_caps_start_new_files_and_chunks(tmp_path: Path) -> None:
    episodes = three_episodes(3, cameras=("front",))
    with LeRobotV3Writer(
        tmp_path / "ds",
        20.0,
        video=LOSSLESS_VIDEO,
        chunks_size=2,
        data_file_size_mb=1e-6,
        video_file_size_mb=1e-6,
    ) as writer:
        for episode in episodes:
            writer.add_episode(episode)
    root = tmp_path / "ds"
    # each episode passes the tiny caps: files 0 and 1 fill chunk 0, the third file opens chunk 1
    for chunk, file in ((0, 0), (0, 1), (1, 0)):
        assert (root / f"data/chunk-{chunk:03d}/file-{file:03d}.parquet").is_file()
        assert (root / f"videos/observation.images.front/chunk-{chunk:03d}/file-{file:03d}.mp4").is_file()
    dataset = LeRobotV3Dataset(root)
    for expected, got in zip(episodes, dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    np.testing.assert_array_equal(dataset.column("action"), np.concatenate([e.actions for e in episodes]))


def test_default_h264_shard_decodes_as_the_episode_files(tmp_path: Path) -> None:
    """Episodes are appended to a shard by stream copy: each decodes exactly as its own video file
    (v2.1's layout, the same encoder settings) does, including a one-frame episode between two others."""
    rng = np.random.default_rng(1)
    episodes = [random_episode(rng, length, "reach", image_size=32) for length in (6, 1, 9)]
    for offset, episode in enumerate(episodes):
        episode.images["front"] = np.roll(smooth_frames(len(episode), 32), 5 * offset, axis=1)
    shards = LeRobotV3Dataset(write_dataset(tmp_path / "v30", episodes, fps=10.0, codebase_version="v3.0"))
    files = LeRobotDataset(write_dataset(tmp_path / "v21", episodes, fps=10.0))
    for from_shard, from_file in zip(shards.episodes(), files.episodes(), strict=True):
        np.testing.assert_array_equal(from_shard.images["front"], from_file.images["front"])


def test_resume_after_a_crash_drops_rows_without_meta(tmp_path: Path) -> None:
    episodes = three_episodes(4, cameras=("front",))
    root = tmp_path / "ds"
    writer = LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO)
    writer.add_episode(episodes[0])
    writer.add_episode(episodes[1])
    meta_after_two = tmp_path / "meta_after_two"
    shutil.copytree(root / "meta", meta_after_two)
    writer.add_episode(episodes[2])
    # a crash after episode 2's frames and video were written but before its meta files were
    shutil.rmtree(root / "meta")
    shutil.copytree(meta_after_two, root / "meta")
    assert pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == 16
    replacement = random_episode(np.random.default_rng(5), 6, "wave", cameras=("front",))
    with LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO, append=True) as resumed:
        assert resumed.add_episode(replacement) == 2
    assert pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == 12
    assert (root / "data/chunk-000/file-001.parquet").is_file()
    assert (root / "videos/observation.images.front/chunk-000/file-001.mp4").is_file()
    dataset = LeRobotV3Dataset(root)
    assert dataset.num_episodes == 3 and dataset.info["total_frames"] == 18
    assert dataset.tasks == {0: "put the red cube on the blue pad", 1: "pick up the cube", 2: "wave"}
    for expected, got in zip([*episodes[:2], replacement], dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    assert dataset.dataset_stats()["action"]["count"].tolist() == [18]


def test_a_dataset_without_episodes_reads_empty_and_takes_more(tmp_path: Path) -> None:
    LeRobotV3Writer(tmp_path / "ds", 20.0).close()  # e.g. a collection whose every attempt failed
    assert LeRobotV3Dataset(tmp_path / "ds").num_episodes == 0
    episode = random_episode(np.random.default_rng(7), 3, "a")
    with LeRobotV3Writer(tmp_path / "ds", 20.0, video=LOSSLESS_VIDEO, append=True) as writer:
        assert writer.add_episode(episode) == 0
    assert_same_episode(episode, LeRobotV3Dataset(tmp_path / "ds").episode(0))


def test_resume_after_a_crash_in_the_first_episode(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO).add_episode(
        random_episode(np.random.default_rng(8), 4, "a")
    )
    shutil.rmtree(root / "meta")  # the crash: frames and video written, no meta file yet
    episode = random_episode(np.random.default_rng(9), 3, "b")
    with LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO) as again:
        assert again.add_episode(episode) == 0
    dataset = LeRobotV3Dataset(root)
    assert dataset.num_episodes == 1 and pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == 3
    assert_same_episode(episode, dataset.episode(0))


def test_versions_are_chosen_and_refused_clearly(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    write_dataset(tmp_path / "v21", [random_episode(rng, 2, "a")], fps=20.0)
    assert type(open_dataset(tmp_path / "v21")) is LeRobotDataset
    with pytest.raises(ValueError, match="is not a LeRobot v3.x layout"):
        LeRobotV3Dataset(tmp_path / "v21")
    with pytest.raises(ValueError, match="v2.1 dataset; this writer appends to v3.0"):
        LeRobotV3Writer(tmp_path / "v21", 20.0, append=True)
    with pytest.raises(ValueError, match="holds a v2.1 dataset: append to it as v2.1, not v3.0"):
        dataset_writer(tmp_path / "v21", 20.0, "v3.0", append=True)
    with pytest.raises(ValueError, match="unknown LeRobot dataset version 'v3'"):
        dataset_writer(tmp_path / "new", 20.0, "v3")
    writer = dataset_writer(tmp_path / "v30", 20.0, "v3.0")
    writer.add_episode(random_episode(rng, 2, "a"))
    writer.close()
    with pytest.raises(ValueError, match="not supported"):
        LeRobotDataset(tmp_path / "v30")
    with pytest.raises(FileExistsError, match="info.json"):
        LeRobotV3Writer(tmp_path / "v30", 20.0)
    with pytest.raises(ValueError, match="fps"):
        LeRobotV3Writer(tmp_path / "v30", 10.0, append=True)
    with pytest.raises(ValueError, match=r"missing \['observation.images.front'\]"):
        LeRobotV3Writer(tmp_path / "v30", 20.0, append=True).add_episode(
            random_episode(rng, 2, "a", cameras=())
        )
    info = json.loads((tmp_path / "v30" / "meta" / "info.json").read_text())
    info["codebase_version"] = "v4.0"
    (tmp_path / "v30" / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match="'v4.0' is not supported"):
        open_dataset(tmp_path / "v30")
