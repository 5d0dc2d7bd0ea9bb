"""LeRobot datasets across the two toolkits: what vla-rl writes LeRobot 0.4's ``LeRobotDataset`` reads,
and what LeRobot writes vla-rl reads (frames, videos, tasks and stats compared value by value)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vla_rl.data import LOSSLESS_VIDEO, lerobot_v3_writer, write_dataset
from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_format import open_dataset
from vla_rl.data.lerobot_v3_reader import LeRobotV3Dataset
from vla_rl.data.lerobot_v3_stats import aggregate_stats, frame_stats, vector_stats
from vla_rl.data.lerobot_v3_writer import LeRobotV3Writer

HISTOGRAM_BINS = 5000
"""LeRobot 0.4 estimates quantiles from a histogram of this many bins over each episode's range: its
values lie within one bin of the exact order statistic."""
IMAGE_STD_UNCHECKED = "std"
"""LeRobot 0.4.2 squares uint8 pixels in uint8 (they wrap around) when it computes image stats, so the
image std it stores and recomputes is wrong (near 0); vla-rl's is checked against numpy in
tests/data/test_data_stats.py. Every other image stat is compared."""


def _episodes(seed: int, lengths: tuple[int, ...], cameras: tuple[str, ...], size: int = 16) -> list[Episode]:
    rng = np.random.default_rng(seed)
    tasks = ["put the red cube on the blue pad", "open the drawer"]
    episodes = []
    for number, length in enumerate(lengths):
        episodes.append(
            Episode(
                images={c: rng.integers(0, 256, (length, size, size, 3), dtype=np.uint8) for c in cameras},
                proprio=rng.normal(size=(length, 5)).astype(np.float32),
                actions=rng.uniform(-1, 1, (length, 4)).astype(np.float32),
                instruction=tasks[number % 2],
                success=number != 1,
                rewards=rng.random(length).astype(np.float32),
                privileged=rng.normal(size=(length, 3)).astype(np.float32),
                success_per_step=np.arange(length) == length - 1 if number != 1 else np.zeros(length, bool),
                extras={"expert_action": rng.uniform(-1, 1, (length, 4)).astype(np.float32)},
            )
        )
    return episodes


def _assert_lerobot_frames_equal(
    episodes: list[Episode], fps: float, read: dict[str, np.ndarray], decoded: list[Episode] | None = None
) -> None:
    """LeRobot's items, frame by frame, against the episodes vla-rl wrote (camera frames against
    ``decoded``'s, vla-rl's reading of a lossy video, when given)."""
    lengths = [len(e) for e in episodes]
    assert int(read["num_frames"]) == sum(lengths) and int(read["num_episodes"]) == len(episodes)
    assert float(read["fps"]) == fps

    def cat(values: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(values)

    frame_index = cat([np.arange(n) for n in lengths])
    expected = {
        "observation.state": cat([e.proprio for e in episodes]),
        "observation.privileged": cat([e.privileged for e in episodes]),
        "action": cat([e.actions for e in episodes]),
        "expert_action": cat([e.extras["expert_action"] for e in episodes]),
        "next.reward": cat([e.rewards for e in episodes]),
        "next.success": cat([e.success_per_step for e in episodes]),
        "next.done": cat([np.arange(n) == n - 1 for n in lengths]),
        "frame_index": frame_index,
        "episode_index": cat([np.full(n, i) for i, n in enumerate(lengths)]),
        "index": np.arange(sum(lengths)),
        "timestamp": (frame_index / fps).astype(np.float32),
        **{
            f"observation.images.{c}": cat([e.images[c] for e in decoded or episodes])
            for c in episodes[0].images
        },
    }
    assert sorted(key for key in read if key.startswith("frames/")) == sorted(
        f"frames/{key}" for key in [*expected, "task", "task_index"]
    )
    for key, values in expected.items():
        np.testing.assert_array_equal(read[f"frames/{key}"], values, err_msg=key)
    assert read["frames/task"].tolist() == [e.instruction for e in episodes for _ in range(len(e))]


def _assert_stats_close(
    ours: dict[str, dict[str, np.ndarray]], read: dict[str, np.ndarray], prefix: str
) -> None:
    """Stats in ``read`` under ``prefix`` (LeRobot's) against ours: min, max and count exact, mean and std
    to float rounding, quantiles within one of LeRobot's histogram bins."""
    features = {key.split("/")[1] for key in read if key.startswith(prefix + "/")}
    assert features == set(ours)
    for feature, stats in ours.items():
        theirs = {name: read[f"{prefix}/{feature}/{name}"] for name in stats}
        assert set(stats) == {key.split("/")[2] for key in read if key.startswith(f"{prefix}/{feature}/")}
        span = np.asarray(stats["max"], np.float64) - np.asarray(stats["min"], np.float64)
        for name, value in stats.items():
            message = f"{prefix} {feature} {name}"
            if name == IMAGE_STD_UNCHECKED and feature.startswith("observation.images."):
                continue
            if name.startswith("q"):
                assert np.all(np.abs(theirs[name] - value) <= span / HISTOGRAM_BINS + 1e-9), message
            elif name in ("min", "max", "count"):
                np.testing.assert_array_equal(theirs[name], value, err_msg=message)
            else:
                np.testing.assert_allclose(theirs[name], value, rtol=1e-6, atol=1e-9, err_msg=message)


def test_vla_rl_v30_read_by_lerobot(tmp_path: Path, run_lerobot) -> None:
    episodes = _episodes(0, (5, 7, 4), cameras=("front", "wrist"))
    root = write_dataset(
        tmp_path / "ours",
        episodes,
        fps=20.0,
        codebase_version="v3.0",
        robot_type="panda",
        video=LOSSLESS_VIDEO,
    )
    read = run_lerobot("lerobot_datasets.py", "read", root, tmp_path / "read.npz", out=tmp_path / "read.npz")
    _assert_lerobot_frames_equal(episodes, 20.0, read)
    assert read["tasks"].tolist() == ["put the red cube on the blue pad", "open the drawer"]
    assert read["task_indices"].tolist() == [0, 1]
    ours = LeRobotV3Dataset(root).dataset_stats()
    # meta/stats.json as LeRobot loads it is what vla-rl wrote ...
    for feature, stats in ours.items():
        for name, value in stats.items():
            np.testing.assert_array_equal(read[f"stats/{feature}/{name}"], value, err_msg=f"{feature} {name}")
    # ... and what LeRobot's own statistics give on the frames it read
    _assert_stats_close(ours, read, "recomputed")
    _assert_windows(episodes, read)


def test_vla_rl_v30_read_by_lerobot_between_finalises(
    tmp_path: Path, run_lerobot, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five episodes finalised after every two: while the fifth is still in the writer's open files (what
    a crash would leave), LeRobot reads the four finalised ones from two data files, two video files and
    (two rows per episodes file here) two ``meta/episodes`` files."""
    monkeypatch.setattr(lerobot_v3_writer, "EPISODES_PER_META_FILE", 2)
    episodes = _episodes(4, (5, 7, 4, 6, 3), cameras=("front",))
    root = tmp_path / "ours"
    writer = LeRobotV3Writer(root, 20.0, robot_type="panda", video=LOSSLESS_VIDEO, finalize_every_episodes=2)
    try:
        for episode in episodes:
            writer.add_episode(episode)
        assert (root / "data/chunk-000/file-002.parquet.partial").is_file()
        assert len(list((root / "meta/episodes/chunk-000").glob("*.parquet"))) == 2
        read = run_lerobot(
            "lerobot_datasets.py", "read", root, tmp_path / "read.npz", out=tmp_path / "read.npz"
        )
        ours = LeRobotV3Dataset(root).dataset_stats()
    finally:
        writer.close()
    _assert_lerobot_frames_equal(episodes[:4], 20.0, read)
    for feature, stats in ours.items():
        for name, value in stats.items():
            np.testing.assert_array_equal(read[f"stats/{feature}/{name}"], value, err_msg=f"{feature} {name}")
    # (LeRobot's recomputation of the stats is compared in test_vla_rl_v30_read_by_lerobot: it does not
    # depend on how the episodes lie in files)
    _assert_windows(episodes[:4], read)


def _assert_windows(episodes: list[Episode], read: dict[str, np.ndarray]) -> None:
    """Training windows LeRobot reads (frame offsets 0, 1, 2 of the actions, -1 and 0 of the cameras)
    against the episodes: an offset past either end repeats the episode's edge frame and is padding."""
    lengths = [len(e) for e in episodes]
    starts = np.cumsum([0, *lengths])
    for key, offsets in (
        ("action", [0, 1, 2]),
        *((f"observation.images.{c}", [-1, 0]) for c in episodes[0].images),
    ):
        values = np.concatenate(
            [e.actions if key == "action" else e.images[key.rsplit(".", 1)[1]] for e in episodes]
        )
        rows, pads = [], []
        for number, length in enumerate(lengths):
            for frame in range(length):
                wanted = [frame + k for k in offsets]
                rows.append([starts[number] + min(max(w, 0), length - 1) for w in wanted])
                pads.append([not 0 <= w < length for w in wanted])
        np.testing.assert_array_equal(read[f"windows/{key}"], values[np.array(rows)], err_msg=key)
        np.testing.assert_array_equal(read[f"windows/{key}_is_pad"], np.array(pads), err_msg=key)


def test_vla_rl_v30_default_h264_read_by_lerobot(tmp_path: Path, run_lerobot) -> None:
    """The default encoding (H.264, 4:2:0, lossy) with a one-frame episode between others: LeRobot seeks
    each episode's frames by timestamp and decodes exactly what vla-rl decodes."""
    episodes = _episodes(7, (6, 1, 9, 4), cameras=("front",), size=32)
    for number, episode in enumerate(episodes):
        episode.images["front"] = _smooth_video(len(episode), 32, 30 * number)
    root = write_dataset(tmp_path / "ours", episodes, fps=10.0, codebase_version="v3.0")
    read = run_lerobot("lerobot_datasets.py", "read", root, tmp_path / "read.npz", out=tmp_path / "read.npz")
    decoded = list(LeRobotV3Dataset(root).episodes())
    _assert_lerobot_frames_equal(episodes, 10.0, read, decoded)
    for expected, got in zip(episodes, decoded, strict=True):
        # lossy, but these frames and no others: the episodes' colours lie 30 grey levels apart
        assert np.abs(got.images["front"].astype(np.int64) - expected.images["front"]).mean() < 4.0


def _smooth_video(length: int, size: int, phase: int) -> np.ndarray:
    y, x = np.mgrid[0:size, 0:size]
    frames = [
        np.stack([x * 3 + 7 * t + phase, y * 3, np.full_like(x, 60 + 12 * t + phase)], axis=-1)
        for t in range(length)
    ]
    return np.clip(np.stack(frames), 0, 255).astype(np.uint8)


def test_lerobot_v30_read_by_vla_rl(tmp_path: Path, run_lerobot) -> None:
    rng = np.random.default_rng(1)
    lengths, tasks = [4, 6, 3], ["pick", "place", "pick"]
    total = sum(lengths)
    spec = {
        "fps": np.array(10),
        "camera_dtype": np.array("video"),
        "lengths": np.array(lengths),
        "tasks": np.array(tasks),
        # LeRobot 0.4 encodes AV1 (SVT-AV1), which needs frames of at least 64 x 64
        "image": np.concatenate([_smooth_video(n, 64, 40 * i) for i, n in enumerate(lengths)]),
        "state": rng.normal(size=(total, 5)).astype(np.float32),
        "action": rng.uniform(-1, 1, (total, 4)).astype(np.float32),
        "reward": rng.random(total).astype(np.float32),
    }
    np.savez(tmp_path / "spec.npz", **spec)
    root = tmp_path / "theirs"
    read = run_lerobot(
        "lerobot_datasets.py",
        "write",
        tmp_path / "spec.npz",
        root,
        tmp_path / "r.npz",
        out=tmp_path / "r.npz",
    )

    dataset = open_dataset(root)
    assert isinstance(dataset, LeRobotV3Dataset) and dataset.info["codebase_version"] == "v3.0"
    assert dataset.num_episodes == 3 and dataset.num_frames == total and dataset.fps == 10.0
    assert dataset.tasks == {0: "pick", 1: "place"}
    starts = np.cumsum([0, *lengths])
    for number, episode in enumerate(dataset.episodes()):
        rows = slice(starts[number], starts[number + 1])
        assert episode.instruction == tasks[number]
        assert episode.success  # no success column: a demonstration
        np.testing.assert_array_equal(episode.proprio, spec["state"][rows])
        np.testing.assert_array_equal(episode.actions, spec["action"][rows])
        np.testing.assert_array_equal(episode.rewards, spec["reward"][rows])
        assert episode.extras == {} and episode.privileged is None
        frames = episode.images["front"]
        # the AV1 frames exactly as LeRobot decodes them (its PyAV, vla-rl's ffmpeg) ...
        np.testing.assert_array_equal(frames, read["frames/observation.images.front"][rows])
        # ... and close to the recorded ones (AV1 at LeRobot's crf 30 is lossy: measured mean error 1.5
        # grey levels; another episode's frames, 40 levels apart, would be far off)
        assert np.abs(frames.astype(np.int64) - spec["image"][rows]).mean() < 3.0

    stored = dataset.dataset_stats()
    for key in (k for k in read if k.startswith("stats/")):
        _, feature, name = key.split("/")
        np.testing.assert_array_equal(stored[feature][name], read[key], err_msg=key)
    # vla-rl's statistics of the recorded values against the ones LeRobot stored
    per_episode = []
    for number in range(3):
        rows = slice(starts[number], starts[number + 1])
        per_episode.append(
            {
                "observation.state": vector_stats(spec["state"][rows]),
                "action": vector_stats(spec["action"][rows]),
                "next.reward": vector_stats(spec["reward"][rows]),
                "observation.images.front": frame_stats(spec["image"][rows]),
            }
        )
    ours = aggregate_stats(per_episode)
    subset = {k: v for k, v in read.items() if k.startswith("stats/") and k.split("/")[1] in ours}
    _assert_stats_close(ours, subset, "stats")


def test_lerobot_v30_images_in_parquet_read_by_vla_rl(tmp_path: Path, run_lerobot) -> None:
    """LeRobot's ``image`` features (PNG frames inside the data files instead of videos): lossless."""
    rng = np.random.default_rng(3)
    lengths = [3, 5]
    spec = {
        "fps": np.array(30),
        "camera_dtype": np.array("image"),
        "lengths": np.array(lengths),
        "tasks": np.array(["stack", "stack"]),
        "image": rng.integers(0, 256, (8, 16, 24, 3), dtype=np.uint8),
        "state": rng.normal(size=(8, 2)).astype(np.float32),
        "action": rng.normal(size=(8, 3)).astype(np.float32),
        "reward": np.zeros(8, np.float32),
    }
    np.savez(tmp_path / "spec.npz", **spec)
    root = tmp_path / "theirs"
    read = run_lerobot(
        "lerobot_datasets.py",
        "write",
        tmp_path / "spec.npz",
        root,
        tmp_path / "r.npz",
        out=tmp_path / "r.npz",
    )
    dataset = open_dataset(root)
    assert dataset.features["observation.images.front"]["dtype"] == "image"
    assert not (root / "videos").exists()
    episodes = list(dataset.episodes())
    assert [len(e) for e in episodes] == lengths and dataset.tasks == {0: "stack"}
    np.testing.assert_array_equal(np.concatenate([e.images["front"] for e in episodes]), spec["image"])
    np.testing.assert_array_equal(read["frames/observation.images.front"], spec["image"])
    np.testing.assert_array_equal(np.concatenate([e.actions for e in episodes]), spec["action"])


def test_vla_rl_v21_converted_by_lerobot(tmp_path: Path, run_lerobot) -> None:
    """LeRobot 0.4 writes only v3.0; its converter takes vla-rl's v2.1 to v3.0, which both then read."""
    episodes = _episodes(2, (3, 6, 5), cameras=("front",))
    root = write_dataset(
        tmp_path / "ours_v21",
        episodes,
        fps=15.0,
        codebase_version="v2.1",
        robot_type="panda",
        video=LOSSLESS_VIDEO,
    )
    read = run_lerobot(
        "lerobot_datasets.py", "convert", root, tmp_path / "read.npz", out=tmp_path / "read.npz"
    )
    _assert_lerobot_frames_equal(episodes, 15.0, read)
    converted = open_dataset(root)
    assert isinstance(converted, LeRobotV3Dataset) and converted.num_episodes == 3
    for expected, got in zip(episodes, converted.episodes(), strict=True):
        assert got.instruction == expected.instruction
        np.testing.assert_array_equal(got.images["front"], expected.images["front"])
        np.testing.assert_array_equal(got.actions, expected.actions)
        np.testing.assert_array_equal(got.proprio, expected.proprio)
        np.testing.assert_array_equal(got.success_per_step, expected.success_per_step)
        np.testing.assert_array_equal(got.extras["expert_action"], expected.extras["expert_action"])
    assert (tmp_path / "ours_v21_old" / "meta" / "episodes.jsonl").is_file()


pytestmark = pytest.mark.slow
