"""Write Episodes as a LeRobot v2.1 dataset, one episode at a time.

Each ``add_episode`` writes the episode's parquet file and videos, appends its lines to the
``meta/*.jsonl`` files and atomically rewrites ``meta/info.json``, so a collection that crashes
keeps every finished episode readable. ``close`` rewrites all meta files atomically from memory.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_layout import (
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_CHUNKS_SIZE,
    EPISODES_PATH,
    EPISODES_STATS_PATH,
    TASKS_PATH,
    VIDEO_PATH,
    append_jsonl,
    atomic_write_text,
    camera_key,
    episode_file,
    jsonl_text,
    read_jsonl,
)
from vla_rl.data.lerobot_reader import column_to_numpy
from vla_rl.data.lerobot_writer_base import LeRobotWriterBase, write_parquet
from vla_rl.data.stats import feature_stats, image_stats, stats_to_json
from vla_rl.data.video import VideoSettings, write_video


def episode_stats(table: pa.Table, episode: Episode) -> dict[str, dict[str, np.ndarray]]:
    """Per-feature stats of one episode: parquet columns plus per-channel video stats in [0, 1]."""
    stats = {camera_key(camera): image_stats(frames) for camera, frames in sorted(episode.images.items())}
    for name in table.column_names:
        stats[name] = feature_stats(column_to_numpy(table.column(name)))
    return stats


class LeRobotWriter(LeRobotWriterBase):
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
        finalize_every_episodes: int = 1,
    ) -> None:
        super().__init__(root, fps, robot_type, video, feature_names, chunks_size)
        if finalize_every_episodes < 0:
            raise ValueError(f"finalize_every_episodes must be >= 0, got {finalize_every_episodes}")
        # taken for the v3.0 writer's interface: every v2.1 episode is complete on disk when add_episode
        # returns, whatever the value
        self.episodes_stats: list[dict[str, Any]] = []
        """The ``meta/episodes_stats.jsonl`` row of every episode written."""
        self._open(append)

    def _load_existing(self, info: dict[str, Any]) -> None:
        self._resume_info(info)
        self.features = info["features"] or None  # none yet: the next episode fixes them
        for row in read_jsonl(self.root / TASKS_PATH, drop_torn_last_line=True):
            self.tasks[row["task"]] = int(row["task_index"])
        stats = read_jsonl(self.root / EPISODES_STATS_PATH, drop_torn_last_line=True)
        episodes = read_jsonl(self.root / EPISODES_PATH, drop_torn_last_line=True)
        self.episodes = episodes[: len(stats)]
        self.episodes_stats = stats[: len(self.episodes)]
        self.total_frames = sum(int(row["length"]) for row in self.episodes)
        self._write_meta()

    def add_episode(self, episode: Episode) -> int:
        """Write one episode (parquet, videos, meta lines); returns its episode index."""
        is_new_task = episode.instruction not in self.tasks
        index, task_index, table = self._start_episode(episode)
        write_parquet(table, episode_file(self.root, DATA_PATH, index, self.chunks_size))
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
        self._write_info()
        return index

    def info(self) -> dict[str, Any]:
        """The ``meta/info.json`` contents for the episodes written so far."""
        video_keys = self._video_keys()
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
            "features": self.features or {},
        }

    def _write_meta(self) -> None:
        tasks = [
            {"task_index": index, "task": task}
            for task, index in sorted(self.tasks.items(), key=lambda kv: kv[1])
        ]
        atomic_write_text(self.root / TASKS_PATH, jsonl_text(tasks))
        atomic_write_text(self.root / EPISODES_PATH, jsonl_text(self.episodes))
        atomic_write_text(self.root / EPISODES_STATS_PATH, jsonl_text(self.episodes_stats))
        self._write_info()
