"""Write Episodes as a LeRobot v2.1 dataset, one episode at a time.

Each ``add_episode`` writes the episode's parquet file and videos, appends its lines to the
``meta/*.jsonl`` files and atomically rewrites ``meta/info.json``, so a collection that crashes
keeps every finished episode readable. ``close`` rewrites all meta files atomically from memory.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_layout import (
    ACTION_KEY,
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_CHUNKS_SIZE,
    DONE_KEY,
    EPISODES_PATH,
    EPISODES_STATS_PATH,
    INFO_PATH,
    PRIVILEGED_KEY,
    REWARD_KEY,
    STATE_KEY,
    SUCCESS_KEY,
    TASKS_PATH,
    VIDEO_PATH,
    append_jsonl,
    atomic_write_text,
    camera_key,
    episode_features,
    episode_file,
    jsonl_text,
    read_json,
    read_jsonl,
    validate_episode,
)
from vla_rl.data.lerobot_reader import column_to_numpy
from vla_rl.data.stats import feature_stats, image_stats, stats_to_json
from vla_rl.data.video import VideoSettings, write_video


def vector_column(values: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """[T, ...] array as a fixed-size-list column (one flat row per frame); [T] as a plain column."""
    values = np.ascontiguousarray(values)
    if values.ndim == 1:
        return pa.array(values, type=dtype)
    width = int(np.prod(values.shape[1:]))
    flat = pa.array(values.reshape(-1), type=dtype)
    return pa.FixedSizeListArray.from_arrays(flat, width)


def step_success(episode: Episode) -> np.ndarray:
    """bool [T] for ``next.success``: the recorded flags, else the episode's label on its last frame."""
    if episode.success_per_step is not None:
        return np.asarray(episode.success_per_step, dtype=bool)
    success = np.zeros(len(episode), dtype=bool)
    success[-1] = bool(episode.success)
    return success


def episode_table(
    episode: Episode, episode_index: int, first_frame_index: int, task_index: int, fps: float
) -> pa.Table:
    """The parquet table of one episode (every non-video feature as a column)."""
    length = len(episode)
    frame_index = np.arange(length, dtype=np.int64)
    success = step_success(episode)
    columns: dict[str, pa.Array] = {
        STATE_KEY: vector_column(np.asarray(episode.proprio, np.float32), pa.float32())
    }
    if episode.privileged is not None:
        columns[PRIVILEGED_KEY] = vector_column(np.asarray(episode.privileged, np.float32), pa.float32())
    columns[ACTION_KEY] = vector_column(np.asarray(episode.actions, np.float32), pa.float32())
    for key in sorted(episode.extras):
        value = np.asarray(episode.extras[key])
        columns[key] = vector_column(value, pa.from_numpy_dtype(value.dtype))
    columns["timestamp"] = pa.array((frame_index / fps).astype(np.float32))
    columns["frame_index"] = pa.array(frame_index)
    columns["episode_index"] = pa.array(np.full(length, episode_index, np.int64))
    columns["index"] = pa.array(first_frame_index + frame_index)
    columns["task_index"] = pa.array(np.full(length, task_index, np.int64))
    if episode.rewards is not None:
        columns[REWARD_KEY] = pa.array(np.asarray(episode.rewards, np.float32))
    columns[DONE_KEY] = pa.array(frame_index == length - 1)
    columns[SUCCESS_KEY] = pa.array(success)
    return pa.table(columns)


def episode_stats(table: pa.Table, episode: Episode) -> dict[str, dict[str, np.ndarray]]:
    """Per-feature stats of one episode: parquet columns plus per-channel video stats in [0, 1]."""
    stats = {camera_key(camera): image_stats(frames) for camera, frames in sorted(episode.images.items())}
    for name in table.column_names:
        stats[name] = feature_stats(column_to_numpy(table.column(name)))
    return stats


class LeRobotWriter:
    """Append-style writer of a LeRobot v2.1 dataset directory.

    The first episode fixes the features (cameras, shapes, optional columns); later episodes must
    match them. With ``append=True`` an existing dataset at ``root`` is continued (its torn final
    meta lines, if a crash left any, are dropped); otherwise ``root`` must not hold a dataset yet.
    """

    def __init__(
        self,
        root: str | Path,
        fps: float,
        robot_type: str = "",
        video: VideoSettings | None = None,
        feature_names: dict[str, list[str]] | None = None,
        chunks_size: int = DEFAULT_CHUNKS_SIZE,
        append: bool = False,
    ) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be > 0, got {fps}")
        self.root = Path(root)
        self.fps = float(fps)
        self.robot_type = robot_type
        self.video = video or VideoSettings()
        self.feature_names = feature_names or {}
        self.chunks_size = chunks_size
        self.features: dict[str, dict[str, Any]] | None = None
        self.episodes: list[dict[str, Any]] = []
        self.episodes_stats: list[dict[str, Any]] = []
        self.tasks: dict[str, int] = {}
        self.total_frames = 0
        self.closed = False
        if (self.root / INFO_PATH).exists():
            if not append:
                raise FileExistsError(
                    f"{self.root / INFO_PATH} exists: pass append=True to add episodes to it"
                )
            self._load_existing()
        self.root.mkdir(parents=True, exist_ok=True)

    def _load_existing(self) -> None:
        info = read_json(self.root / INFO_PATH)
        if float(info["fps"]) != self.fps:
            raise ValueError(
                f"{self.root / INFO_PATH} has fps {info['fps']}, the writer was given {self.fps}"
            )
        self.features = info["features"]
        self.chunks_size = int(info.get("chunks_size", self.chunks_size))
        self.robot_type = info.get("robot_type") or self.robot_type
        for row in read_jsonl(self.root / TASKS_PATH, drop_torn_last_line=True):
            self.tasks[row["task"]] = int(row["task_index"])
        stats = read_jsonl(self.root / EPISODES_STATS_PATH, drop_torn_last_line=True)
        episodes = read_jsonl(self.root / EPISODES_PATH, drop_torn_last_line=True)
        self.episodes = episodes[: len(stats)]
        self.episodes_stats = stats[: len(self.episodes)]
        self.total_frames = sum(int(row["length"]) for row in self.episodes)
        self._write_meta()

    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    def add_episode(self, episode: Episode) -> int:
        """Write one episode (parquet, videos, meta lines); returns its episode index."""
        if self.closed:
            raise RuntimeError(f"the writer of {self.root} is closed")
        validate_episode(episode)
        features = episode_features(episode, self.fps, self.video, self.feature_names)
        if self.features is None:
            self.features = features
        elif features != self.features:
            raise ValueError(
                f"episode features differ from the dataset's: {_feature_difference(self.features, features)}"
            )
        index = self.num_episodes
        is_new_task = episode.instruction not in self.tasks
        task_index = self.tasks.setdefault(episode.instruction, len(self.tasks))
        table = episode_table(episode, index, self.total_frames, task_index, self.fps)
        data_path = episode_file(self.root, DATA_PATH, index, self.chunks_size)
        data_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = data_path.with_name(data_path.name + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, data_path)
        for camera, frames in sorted(episode.images.items()):
            path = episode_file(self.root, VIDEO_PATH, index, self.chunks_size, video_key=camera_key(camera))
            write_video(path, frames, self.fps, self.video)
        episode_row = {
            "episode_index": index,
            "tasks": [episode.instruction],
            "length": len(episode),
            "success": bool(episode.success),
        }
        stats_row = {"episode_index": index, "stats": stats_to_json(episode_stats(table, episode))}
        if is_new_task:
            append_jsonl(self.root / TASKS_PATH, {"task_index": task_index, "task": episode.instruction})
        append_jsonl(self.root / EPISODES_PATH, episode_row)
        append_jsonl(self.root / EPISODES_STATS_PATH, stats_row)
        self.episodes.append(episode_row)
        self.episodes_stats.append(stats_row)
        self.total_frames += len(episode)
        atomic_write_text(self.root / INFO_PATH, _json(self.info()))
        return index

    def info(self) -> dict[str, Any]:
        """The ``meta/info.json`` contents for the episodes written so far."""
        features = self.features or {}
        video_keys = [key for key, spec in features.items() if spec["dtype"] == "video"]
        return {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": self.robot_type,
            "total_episodes": self.num_episodes,
            "total_frames": self.total_frames,
            "total_tasks": len(self.tasks),
            "total_videos": self.num_episodes * len(video_keys),
            "total_chunks": math.ceil(self.num_episodes / self.chunks_size),
            "chunks_size": self.chunks_size,
            "fps": self.fps,
            "splits": {"train": f"0:{self.num_episodes}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if video_keys else None,
            "features": features,
        }

    def _write_meta(self) -> None:
        tasks = [
            {"task_index": index, "task": task}
            for task, index in sorted(self.tasks.items(), key=lambda kv: kv[1])
        ]
        atomic_write_text(self.root / TASKS_PATH, jsonl_text(tasks))
        atomic_write_text(self.root / EPISODES_PATH, jsonl_text(self.episodes))
        atomic_write_text(self.root / EPISODES_STATS_PATH, jsonl_text(self.episodes_stats))
        atomic_write_text(self.root / INFO_PATH, _json(self.info()))

    def close(self) -> None:
        """Rewrite every meta file atomically; the dataset is complete afterwards."""
        if not self.closed:
            self._write_meta()
            self.closed = True

    def __enter__(self) -> LeRobotWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_dataset(
    root: str | Path,
    episodes: Sequence[Episode],
    fps: float,
    robot_type: str = "",
    video: VideoSettings | None = None,
    feature_names: dict[str, list[str]] | None = None,
) -> Path:
    """Write ``episodes`` as a new LeRobot v2.1 dataset at ``root``; returns ``root``."""
    with LeRobotWriter(root, fps, robot_type, video, feature_names) as writer:
        for episode in episodes:
            writer.add_episode(episode)
    return Path(root)


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, indent=4) + "\n"


def _feature_difference(expected: dict[str, Any], got: dict[str, Any]) -> str:
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    changed = sorted(key for key in set(expected) & set(got) if expected[key] != got[key])
    parts = [f"missing {missing}" * bool(missing), f"unexpected {extra}" * bool(extra)]
    parts += [f"{key}: {expected[key]} != {got[key]}" for key in changed]
    return "; ".join(part for part in parts if part)
