"""LeRobot v3.0 datasets: write Episodes, read them back, the layout's files, stats and resuming."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from data_test_episodes import assert_same_episode, random_episode, smooth_frames, three_episodes

from vla_rl.data import LOSSLESS_VIDEO, LeRobotDataset, lerobot_v3_writer, write_dataset
from vla_rl.data.lerobot_format import dataset_writer, open_dataset
from vla_rl.data.lerobot_v3_reader import LeRobotV3Dataset
from vla_rl.data.lerobot_v3_stats import aggregate_stats, frame_stats
from vla_rl.data.lerobot_v3_writer import LeRobotV3Writer
from vla_rl.data.video import VideoSettings, read_video, write_video
from vla_rl.data.video_shards import VideoStream


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


def test_default_h264_episodes_seek_into_one_stream(tmp_path: Path) -> None:
    """With the default lossy H.264 the episodes are one continuous stream (an episode need not start at
    a keyframe): each episode read by seeking equals its frames in a decode of the whole file, including a
    one-frame episode between two others, and each decoded frame is nearest to the frame recorded there."""
    rng = np.random.default_rng(1)
    episodes = [random_episode(rng, length, "reach", image_size=32) for length in (6, 1, 9)]
    for offset, episode in enumerate(episodes):
        episode.images["front"] = np.roll(smooth_frames(len(episode), 32), 5 * offset, axis=1)
    dataset = LeRobotV3Dataset(write_dataset(tmp_path / "v30", episodes, fps=10.0, codebase_version="v3.0"))
    whole = read_video(dataset.video_file(0, "observation.images.front"))
    assert len(whole) == 16
    recorded = np.concatenate([e.images["front"] for e in episodes]).astype(np.int64)
    starts = np.cumsum([0, 6, 1])
    for start, expected, got in zip(starts, episodes, dataset.episodes(), strict=True):
        np.testing.assert_array_equal(got.images["front"], whole[start : start + len(expected)])
        errors = np.abs(got.images["front"][:, None].astype(np.int64) - recorded[None]).mean(axis=(2, 3, 4))
        np.testing.assert_array_equal(errors.argmin(axis=1), start + np.arange(len(expected)))


def _keyframes(path: Path) -> int:
    """Keyframes in the video at ``path`` (ffmpeg decoding only those)."""
    import imageio_ffmpeg

    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-skip_frame", "nokey", "-i", str(path)]
    result = subprocess.run(
        [*command, "-fps_mode", "passthrough", "-f", "null", "-"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return int(re.findall(r"frame=\s*(\d+)", result.stderr)[-1])


def test_keyframe_interval_reaches_the_encoder(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    episodes = [random_episode(rng, length, "reach", image_size=32) for length in (6, 1, 9)]
    for offset, episode in enumerate(episodes):
        episode.images["front"] = np.roll(smooth_frames(len(episode), 32), 5 * offset, axis=1)
    every_two = VideoSettings(keyframe_interval=2)
    dataset = LeRobotV3Dataset(
        write_dataset(tmp_path / "g2", episodes, fps=10.0, codebase_version="v3.0", video=every_two)
    )
    default = LeRobotV3Dataset(
        write_dataset(tmp_path / "default", episodes, fps=10.0, codebase_version="v3.0")
    )
    # 16 frames: a keyframe at frames 0, 2, ..., 14; the encoder's default puts far fewer
    assert _keyframes(dataset.video_file(0, "observation.images.front")) == 8
    assert _keyframes(default.video_file(0, "observation.images.front")) < 8
    whole = read_video(dataset.video_file(0, "observation.images.front"))
    for start, expected, got in zip(np.cumsum([0, 6, 1]), episodes, dataset.episodes(), strict=True):
        np.testing.assert_array_equal(got.images["front"], whole[start : start + len(expected)])
    write_video(tmp_path / "v21.mp4", smooth_frames(9, 32), 10.0, VideoSettings(keyframe_interval=4))
    assert _keyframes(tmp_path / "v21.mp4") == 3  # frames 0, 4 and 8: the v2.1 files too
    with pytest.raises(ValueError, match="keyframe_interval must be >= 0"):
        VideoSettings(keyframe_interval=-1)


def _crash_after(root: Path, seed: int, lengths: tuple[int, ...], finalize_every: int) -> None:
    """Write random episodes of ``lengths`` in another process that is killed (SIGKILL) before it closes
    the writer: no finalise, no clean-up, as a power cut or an out-of-memory kill would leave it."""
    script = f"""
import os, signal, sys
import numpy as np
sys.path.insert(0, {str(Path(__file__).parent)!r})
from data_test_episodes import random_episode
from vla_rl.data import LOSSLESS_VIDEO
from vla_rl.data import lerobot_v3_writer
from vla_rl.data.lerobot_v3_stats import aggregate_stats
from vla_rl.data.lerobot_v3_writer import LeRobotV3Writer
from vla_rl.data.video import VideoSettings, read_video, write_video
from vla_rl.data.video_shards import VideoStream
rng = np.random.default_rng({seed})
writer = LeRobotV3Writer({str(root)!r}, 20.0, video=LOSSLESS_VIDEO, finalize_every_episodes={finalize_every})
for number, length in enumerate({lengths!r}):
    writer.add_episode(random_episode(rng, length, f"task {{number % 2}}"))
os.kill(os.getpid(), signal.SIGKILL)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == -signal.SIGKILL, result.stderr


def test_a_crash_loses_only_the_episodes_since_the_last_finalise(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    lengths = (5, 7, 4, 6, 3)
    _crash_after(root, 4, lengths, finalize_every=2)
    rng = np.random.default_rng(4)
    written = [random_episode(rng, length, f"task {number % 2}") for number, length in enumerate(lengths)]
    # finalised after episodes 1 and 3; episode 4 was in the open files
    dataset = LeRobotV3Dataset(root)
    assert dataset.num_episodes == 4 and dataset.info["total_frames"] == 22
    for expected, got in zip(written[:4], dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    assert [dataset.episode_path(i).name for i in range(4)] == ["file-000.parquet"] * 2 + [
        "file-001.parquet"
    ] * 2
    assert (root / "data/chunk-000/file-002.parquet.partial").is_file()
    # the video's .partial file may come later: ffmpeg, its own process, still writes what it was sent
    assert not (root / "videos/observation.images.front/chunk-000/file-002.mp4").exists()
    assert dataset.dataset_stats()["action"]["count"].tolist() == [22]

    replacement = random_episode(np.random.default_rng(5), 6, "wave")
    with LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO, append=True) as resumed:
        assert resumed.add_episode(replacement) == 4
    assert not list(root.rglob("*.partial"))
    dataset = LeRobotV3Dataset(root)
    assert dataset.num_episodes == 5 and dataset.info["total_frames"] == 28
    assert dataset.tasks == {0: "task 0", 1: "task 1", 2: "wave"}
    for expected, got in zip([*written[:4], replacement], dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    assert dataset.episode_path(4).name == "file-002.parquet"
    assert dataset.dataset_stats()["action"]["count"].tolist() == [28]


def test_finalise_starts_new_files_and_a_failed_episode_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ds"
    episodes = three_episodes(6, cameras=("front",))
    writer = LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO, finalize_every_episodes=0)
    writer.add_episode(episodes[0])
    assert not (root / "meta/info.json").exists()  # no dataset before the first finalise
    writer.finalize()
    assert LeRobotV3Dataset(root).num_episodes == 1
    writer.add_episode(episodes[1])
    with monkeypatch.context() as patch:
        patch.setattr(VideoStream, "add", _disk_full)
        with pytest.raises(OSError, match="No space left"):
            writer.add_episode(random_episode(np.random.default_rng(7), 3, "odd"))
    # episode 1 was in the open files with the failed one: both are gone, as after a crash
    assert writer.num_episodes == 1 and not list(root.rglob("*.partial"))
    assert writer.add_episode(episodes[2]) == 1
    writer.close()
    dataset = LeRobotV3Dataset(root)
    assert dataset.num_episodes == 2 and dataset.tasks == {0: "put the red cube on the blue pad"}
    for expected, got in zip([episodes[0], episodes[2]], dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    assert [dataset.episode_path(i).name for i in range(2)] == ["file-000.parquet", "file-001.parquet"]


def _disk_full(*args: object) -> int:
    raise OSError(28, "No space left on device")


def test_a_file_that_cannot_be_finished_rolls_back(tmp_path: Path) -> None:
    writer = LeRobotV3Writer(tmp_path / "ds", 20.0, video=VideoSettings(codec="no-such-encoder"))
    writer.add_episode(random_episode(np.random.default_rng(8), 4, "a"))
    with pytest.raises(RuntimeError, match="ffmpeg"):
        writer.close()
    # the data file was finished before the video failed: it goes too, as no episode points into it
    assert writer.num_episodes == 0 and not list((tmp_path / "ds").rglob("file-*"))


def test_meta_files_that_cannot_be_written_are_written_by_the_next_finalise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ds"
    episodes = three_episodes(9, cameras=("front",))
    writer = LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO, finalize_every_episodes=0)
    writer.add_episode(episodes[0])
    with monkeypatch.context() as patch:
        patch.setattr(LeRobotV3Writer, "_write_meta", _disk_full)
        with pytest.raises(OSError, match="No space left"):
            writer.finalize()
    # the finished files stay (nothing points into them yet) and the episode with them
    assert (root / "data/chunk-000/file-000.parquet").is_file() and not (root / "meta/info.json").exists()
    writer.add_episode(episodes[1])
    writer.close()
    dataset = LeRobotV3Dataset(root)
    for expected, got in zip(episodes[:2], dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    assert [dataset.episode_path(i).name for i in range(2)] == ["file-000.parquet", "file-001.parquet"]


def test_episodes_files_rotate_and_stats_pool_across_finalises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each finalise rewrites only the current ``meta/episodes`` file (two rows here) and pools the new
    episodes' stats into the running total: the same stats as pooling every episode at once."""
    monkeypatch.setattr(lerobot_v3_writer, "EPISODES_PER_META_FILE", 2)
    rng = np.random.default_rng(10)
    episodes = [random_episode(rng, length, f"task {length % 2}") for length in (3, 5, 2, 4, 6)]
    root = tmp_path / "ds"
    with LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO, finalize_every_episodes=1) as writer:
        for episode in episodes[:4]:
            writer.add_episode(episode)
    with LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO, append=True) as resumed:
        resumed.add_episode(episodes[4])
    meta = sorted((root / "meta/episodes/chunk-000").glob("*.parquet"))
    # two rows per file; the resumed writer starts a new file
    rows = [pq.read_table(path).column("episode_index").to_pylist() for path in meta]
    assert [path.name for path in meta] == ["file-000.parquet", "file-001.parquet", "file-002.parquet"]
    assert rows == [[0, 1], [2, 3], [4]]
    assert pq.read_table(meta[1]).column("meta/episodes/file_index").to_pylist() == [1, 1]
    dataset = LeRobotV3Dataset(root)
    for expected, got in zip(episodes, dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    at_once = aggregate_stats([dataset.episode_stats(i) for i in range(5)])
    pooled = dataset.dataset_stats()
    assert sorted(pooled) == sorted(at_once)
    for feature, stats in at_once.items():
        for name, value in stats.items():
            np.testing.assert_allclose(pooled[feature][name], value, rtol=1e-12, atol=1e-12, err_msg=feature)


def test_a_dataset_without_episodes_reads_empty_and_takes_more(tmp_path: Path) -> None:
    LeRobotV3Writer(tmp_path / "ds", 20.0).close()  # e.g. a collection whose every attempt failed
    assert LeRobotV3Dataset(tmp_path / "ds").num_episodes == 0
    episode = random_episode(np.random.default_rng(7), 3, "a")
    with LeRobotV3Writer(tmp_path / "ds", 20.0, video=LOSSLESS_VIDEO, append=True) as writer:
        assert writer.add_episode(episode) == 0
    assert_same_episode(episode, LeRobotV3Dataset(tmp_path / "ds").episode(0))


def test_a_crash_before_the_first_finalise_leaves_no_dataset(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    _crash_after(root, 8, (4, 3), finalize_every=0)
    assert not (root / "meta/info.json").exists() and list(root.rglob("*.partial"))
    episode = random_episode(np.random.default_rng(9), 3, "b")
    with LeRobotV3Writer(root, 20.0, video=LOSSLESS_VIDEO) as again:  # a new dataset: no append needed
        assert again.add_episode(episode) == 0
    assert not list(root.rglob("*.partial"))
    dataset = LeRobotV3Dataset(root)
    assert dataset.num_episodes == 1 and pq.read_table(root / "data/chunk-000/file-000.parquet").num_rows == 3
    assert_same_episode(episode, dataset.episode(0))


def test_versions_are_chosen_and_refused_clearly(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    write_dataset(tmp_path / "v21", [random_episode(rng, 2, "a")], fps=20.0, codebase_version="v2.1")
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
