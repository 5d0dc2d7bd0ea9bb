"""Write Episodes as a LeRobot dataset and read them back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from data_test_episodes import assert_same_episode, random_episode, smooth_frames, three_episodes

from vla_rl.data import (
    LOSSLESS_VIDEO,
    LeRobotDataset,
    LeRobotWriter,
    VideoSettings,
    write_dataset,
)
from vla_rl.data.episode import Episode


def test_lossless_round_trip_is_exact(tmp_path: Path) -> None:
    episodes = three_episodes(0)
    write_dataset(
        tmp_path / "ds", episodes, fps=20.0, robot_type="panda", video=LOSSLESS_VIDEO, codebase_version="v2.1"
    )
    dataset = LeRobotDataset(tmp_path / "ds")
    assert dataset.num_episodes == len(dataset) == 3
    assert dataset.num_frames == 16
    assert dataset.fps == 20.0
    assert dataset.tasks == {0: "put the red cube on the blue pad", 1: "pick up the cube"}
    assert dataset.cameras == {"front": "observation.images.front", "wrist": "observation.images.wrist"}
    for expected, got in zip(episodes, dataset.episodes(), strict=True):
        assert_same_episode(expected, got)
    assert_same_episode(episodes[2], dataset.episode(-1))


def test_default_h264_video_is_close(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    episode = random_episode(rng, 6, "reach the target", image_size=32)
    episode.images["front"] = smooth_frames(6, 32)
    write_dataset(tmp_path / "ds", [episode], fps=10.0, codebase_version="v2.1")
    got = LeRobotDataset(tmp_path / "ds").episode(0)
    error = np.abs(got.images["front"].astype(np.int64) - episode.images["front"])
    # crf 23 with 4:2:0 chroma: measured mean 1.8, max 9 grey levels on these gradients
    assert error.mean() < 2.5 and error.max() <= 12
    np.testing.assert_array_equal(got.actions, episode.actions)


def test_action_stats_over_all_frames(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    episodes = [random_episode(rng, 3, "a"), random_episode(rng, 2, "b")]
    episodes[0].actions = np.array([[0, 1, 0, 0], [2, 3, 0, 0], [4, 8, 0, 0]], np.float32)
    episodes[1].actions = np.array([[6, -1, 0, 1], [8, 0, 0, 1]], np.float32)
    write_dataset(tmp_path / "ds", episodes, fps=20.0, video=LOSSLESS_VIDEO, codebase_version="v2.1")
    stats = LeRobotDataset(tmp_path / "ds").action_stats()
    # dim 0 over five frames: 0 2 4 6 8 -> q01 at position 0.04: 0.08; q99 at 3.96: 7.92; std sqrt(8)
    np.testing.assert_allclose(stats["q01"][0], 0.08, rtol=1e-12)
    np.testing.assert_allclose(stats["q99"][0], 7.92, rtol=1e-12)
    np.testing.assert_allclose(stats["mean"], [4.0, 2.2, 0.0, 0.4], rtol=1e-12)
    np.testing.assert_allclose(stats["std"][0], np.sqrt(8.0), rtol=1e-12)
    np.testing.assert_allclose(stats["min"], [0, -1, 0, 0])
    np.testing.assert_allclose(stats["max"], [8, 8, 0, 1])


def test_episode_without_optional_fields(tmp_path: Path) -> None:
    episode = Episode(
        images={},
        proprio=np.arange(6, dtype=np.float32).reshape(3, 2),
        actions=np.ones((3, 1), np.float32),
        instruction="wave",
        success=True,
    )
    write_dataset(tmp_path / "ds", [episode], fps=5.0, codebase_version="v2.1")
    got = LeRobotDataset(tmp_path / "ds").episode(0)
    assert got.images == {} and got.rewards is None and got.privileged is None and got.extras == {}
    # no per-step flags recorded: the episode label lands on the last frame
    assert got.success_per_step.tolist() == [False, False, True]
    np.testing.assert_array_equal(got.proprio, episode.proprio)
    assert (tmp_path / "ds" / "videos").exists() is False


def test_append_writer_keeps_finished_episodes_without_close(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    episodes = [random_episode(rng, 4, "a"), random_episode(rng, 3, "b"), random_episode(rng, 5, "a")]
    writer = LeRobotWriter(tmp_path / "ds", fps=20.0, video=LOSSLESS_VIDEO)
    writer.add_episode(episodes[0])
    writer.add_episode(episodes[1])
    # a crash here: close() never runs, yet the two finished episodes are readable
    dataset = LeRobotDataset(tmp_path / "ds")
    assert dataset.num_episodes == 2 and dataset.info["total_frames"] == 7
    assert_same_episode(episodes[1], dataset.episode(1))
    # a torn last meta line, as a crash mid-append would leave, is dropped when appending again
    with open(tmp_path / "ds" / "meta" / "episodes.jsonl", "a") as file:
        file.write('{"episode_index": 2, "tas')
    with LeRobotWriter(tmp_path / "ds", fps=20.0, video=LOSSLESS_VIDEO, append=True) as resumed:
        assert resumed.add_episode(episodes[2]) == 2
    dataset = LeRobotDataset(tmp_path / "ds")
    assert dataset.num_episodes == 3 and dataset.num_frames == 12
    assert dataset.info["total_episodes"] == 3 and dataset.info["splits"] == {"train": "0:3"}
    assert dataset.tasks == {0: "a", 1: "b"}
    assert_same_episode(episodes[2], dataset.episode(2))
    assert dataset.episode(2).extras["expert_action"].shape == (5, 4)


def test_append_to_a_dataset_closed_before_its_first_episode(tmp_path: Path) -> None:
    """A collection that wrote no episode leaves an empty dataset; appending to it fixes the features
    from the first episode instead of refusing every episode as different."""
    LeRobotWriter(tmp_path / "ds", fps=20.0, video=LOSSLESS_VIDEO).close()
    episode = random_episode(np.random.default_rng(4), 4, "a")
    with LeRobotWriter(tmp_path / "ds", fps=20.0, video=LOSSLESS_VIDEO, append=True) as resumed:
        assert resumed.add_episode(episode) == 0
    dataset = LeRobotDataset(tmp_path / "ds")
    assert dataset.num_episodes == 1
    assert_same_episode(episode, dataset.episode(0))


def test_writer_refuses_existing_dataset_and_mismatched_episodes(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    write_dataset(tmp_path / "ds", [random_episode(rng, 2, "a")], fps=20.0, codebase_version="v2.1")
    with pytest.raises(FileExistsError, match="info.json"):
        LeRobotWriter(tmp_path / "ds", fps=20.0)
    with pytest.raises(ValueError, match="fps"):
        LeRobotWriter(tmp_path / "ds", fps=10.0, append=True)
    writer = LeRobotWriter(tmp_path / "other", fps=20.0)
    writer.add_episode(random_episode(rng, 2, "a"))
    with pytest.raises(ValueError, match=r"missing \['observation.images.front'\]"):
        writer.add_episode(random_episode(rng, 2, "a", cameras=()))
    with pytest.raises(ValueError, match="observation.images.front"):
        writer.add_episode(random_episode(rng, 2, "a", image_size=8))


def test_invalid_episodes_are_rejected(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    episode = random_episode(rng, 3, "a")
    episode.rewards = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match="rewards has 2 rows but actions have 3"):
        write_dataset(tmp_path / "a", [episode], fps=20.0, codebase_version="v2.1")
    episode = random_episode(rng, 3, "a")
    episode.images["front"] = episode.images["front"].astype(np.float32)
    with pytest.raises(ValueError, match="uint8"):
        write_dataset(tmp_path / "b", [episode], fps=20.0, codebase_version="v2.1")
    episode = random_episode(rng, 3, "a")
    episode.extras["next.reward"] = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="collides"):
        write_dataset(tmp_path / "c", [episode], fps=20.0, codebase_version="v2.1")


def test_video_settings_reach_the_encoder(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    episode = random_episode(rng, 3, "a", image_size=16)
    settings = VideoSettings(codec="libx264", pix_fmt="yuv444p", crf=0, preset="ultrafast")
    write_dataset(tmp_path / "ds", [episode], fps=20.0, video=settings, codebase_version="v2.1")
    info = LeRobotDataset(tmp_path / "ds").info["features"]["observation.images.front"]["info"]
    assert info["video.codec"] == "h264" and info["video.pix_fmt"] == "yuv444p"
    got = LeRobotDataset(tmp_path / "ds").episode(0).images["front"]
    # 4:4:4 at crf 0 is lossless in YUV; only the RGB<->YUV conversion rounds
    assert np.abs(got.astype(np.int64) - episode.images["front"]).max() <= 3
