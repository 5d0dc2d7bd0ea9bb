"""Write Episodes as a LeRobot v3.0 dataset (LeRobot 0.4's format), one episode at a time.

Each ``add_episode`` rewrites the current data file with the episode's frames appended, appends its
videos to each camera's current video file (stream copy), and rewrites the episodes table, tasks,
stats and ``meta/info.json``, every file atomically (data and videos first, the meta files that point
at them last), so a collection that crashes keeps every finished episode readable. A resumed writer
(``append=True``) starts new data and video files, as LeRobot does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_layout import INFO_PATH, atomic_write_text, camera_key
from vla_rl.data.lerobot_reader import column_to_numpy
from vla_rl.data.lerobot_v3_layout import (
    CODEBASE_VERSION_V3,
    DATA_CHUNK_KEY,
    DATA_FILE_KEY,
    DATA_PATH_V3,
    DEFAULT_CHUNKS_SIZE,
    DEFAULT_DATA_FILE_SIZE_MB,
    DEFAULT_VIDEO_FILE_SIZE_MB,
    EPISODES_PATH_V3,
    FROM_INDEX_KEY,
    META_CHUNK_KEY,
    META_FILE_KEY,
    STATS_PATH,
    TASKS_PATH_V3,
    TO_INDEX_KEY,
    VIDEO_PATH_V3,
    next_file,
    shard_file,
    size_mb,
    video_column,
)
from vla_rl.data.lerobot_v3_reader import read_episode_rows, read_tasks
from vla_rl.data.lerobot_v3_stats import (
    Stats,
    aggregate_stats,
    frame_stats,
    stats_from_columns,
    stats_to_columns,
    vector_stats,
)
from vla_rl.data.lerobot_writer_base import LeRobotWriterBase, write_parquet
from vla_rl.data.stats import stats_to_json
from vla_rl.data.video import VideoSettings, write_video
from vla_rl.data.video_shards import append_video

TASK_INDEX_COLUMN = "__index_level_0__"
"""Where pandas (which LeRobot reads ``meta/tasks.parquet`` with) keeps an unnamed index: the tasks."""


def tasks_table(tasks: dict[str, int]) -> pa.Table:
    """``meta/tasks.parquet``: ``task_index`` and the instruction, marked as the pandas index (as LeRobot
    writes it) so that ``pandas.read_parquet`` gives LeRobot's task-indexed frame."""
    ordered = sorted(tasks.items(), key=lambda item: item[1])
    table = pa.table(
        {
            "task_index": pa.array([index for _, index in ordered], pa.int64()),
            TASK_INDEX_COLUMN: pa.array([task for task, _ in ordered], pa.large_string()),
        }
    )
    pandas_meta = {
        "index_columns": [TASK_INDEX_COLUMN],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": None,
                "field_name": TASK_INDEX_COLUMN,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
    }
    return table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})


def episode_stats_v3(table: pa.Table, episode: Episode) -> Stats:
    """Per-feature stats of one episode with quantiles: parquet columns and per-channel frame stats."""
    stats = {camera_key(camera): frame_stats(frames) for camera, frames in sorted(episode.images.items())}
    for name in table.column_names:
        stats[name] = vector_stats(column_to_numpy(table.column(name)))
    return stats


class LeRobotV3Writer(LeRobotWriterBase):
    """Append-style writer of a LeRobot v3.0 dataset directory, with ``LeRobotWriter``'s interface.

    The first episode fixes the features; later episodes must match them. With ``append=True`` an
    existing v3.0 dataset at ``root`` is continued; otherwise ``root`` must not hold a dataset yet.
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
        data_file_size_mb: float = DEFAULT_DATA_FILE_SIZE_MB,
        video_file_size_mb: float = DEFAULT_VIDEO_FILE_SIZE_MB,
    ) -> None:
        super().__init__(root, fps, robot_type, video, feature_names, chunks_size)
        if chunks_size <= 0 or data_file_size_mb <= 0 or video_file_size_mb <= 0:
            raise ValueError("chunks_size and the file size caps must be > 0")
        self.data_file_size_mb = float(data_file_size_mb)
        self.video_file_size_mb = float(video_file_size_mb)
        self.episodes_stats: list[Stats] = []
        """The stats of every episode written (its row in ``episodes`` holds them as columns too)."""
        self._data_file: tuple[int, int] | None = None
        """(chunk, file) of the data file being filled; None: the next episode starts a new one."""
        self._data_tables: list[pa.Table] = []
        """The episodes already in that file (rewritten with each new episode)."""
        self._video_files: dict[str, tuple[int, int, int]] = {}
        """Video key -> (chunk, file, frames in it) of the video file being filled."""
        self._last_files: dict[str, tuple[int, int]] = {}
        """Data and video keys -> the (chunk, file) used last, from which new files count on."""
        self._open(append)

    def _load_existing(self, info: dict[str, Any]) -> None:
        if str(info.get("codebase_version")) != CODEBASE_VERSION_V3:
            raise ValueError(
                f"{self.root / INFO_PATH} is a {info.get('codebase_version')} dataset; this writer appends "
                f"to {CODEBASE_VERSION_V3} ones"
            )
        self._resume_info(info)
        self.features = info["features"] or None  # none yet: the next episode fixes them
        self.tasks = {task: index for index, task in read_tasks(self.root).items()}
        self.episodes = read_episode_rows(self.root, with_stats=True) if info.get("total_episodes") else []
        self.episodes_stats = [stats_from_columns(row) for row in self.episodes]
        self.total_frames = sum(int(row["length"]) for row in self.episodes)
        if self.episodes:
            last = self.episodes[-1]
            self._last_files["data"] = (int(last[DATA_CHUNK_KEY]), int(last[DATA_FILE_KEY]))
            # rows of an episode that a crash left in the last data file without its meta row go
            data_path = shard_file(self.root, DATA_PATH_V3, *self._last_files["data"])
            table = pq.read_table(data_path)
            known = pa.array(np.arange(self.total_frames, dtype=np.int64))
            write_parquet(table.filter(pc.is_in(table.column("index"), value_set=known)), data_path)
            for key in self._video_keys():
                chunk_column, file_column = video_column(key, "chunk_index"), video_column(key, "file_index")
                self._last_files[key] = (int(last[chunk_column]), int(last[file_column]))
        self._write_meta()

    def _new_file(self, key: str) -> tuple[int, int]:
        last = self._last_files.get(key)
        chunk_file = (0, 0) if last is None else next_file(*last, self.chunks_size)
        self._last_files[key] = chunk_file
        return chunk_file

    def add_episode(self, episode: Episode) -> int:
        """Write one episode (frames, videos, meta); returns its episode index."""
        index, _, table = self._start_episode(episode)
        row: dict[str, Any] = {
            "episode_index": index,
            "tasks": [episode.instruction],
            "length": len(episode),
            **self._write_frames(table),
        }
        for camera, frames in sorted(episode.images.items()):
            row.update(self._write_video(camera_key(camera), frames, index))
        stats = episode_stats_v3(table, episode)
        row.update({META_CHUNK_KEY: 0, META_FILE_KEY: 0, "success": bool(episode.success)})
        row.update(stats_to_columns(stats))
        self.episodes.append(row)
        self.episodes_stats.append(stats)
        self.total_frames += len(episode)
        self._write_meta()
        return index

    def _write_frames(self, table: pa.Table) -> dict[str, int]:
        """Append the episode's rows to the current data file (or a new one past the size cap)."""
        if self._data_file is not None:
            path = shard_file(self.root, DATA_PATH_V3, *self._data_file)
            frames_in_file = sum(len(t) for t in self._data_tables)
            projected_mb = size_mb(path) * (frames_in_file + len(table)) / max(frames_in_file, 1)
            if projected_mb >= self.data_file_size_mb:
                self._data_file = None
        if self._data_file is None:
            self._data_file = self._new_file("data")
            self._data_tables = []
        self._data_tables.append(table)
        path = shard_file(self.root, DATA_PATH_V3, *self._data_file)
        write_parquet(pa.concat_tables(self._data_tables), path)
        first = int(table.column("index")[0].as_py())
        return {
            DATA_CHUNK_KEY: self._data_file[0],
            DATA_FILE_KEY: self._data_file[1],
            FROM_INDEX_KEY: first,
            TO_INDEX_KEY: first + len(table),
        }

    def _write_video(self, key: str, frames: np.ndarray, index: int) -> dict[str, Any]:
        """Encode the episode's frames and append them to the camera's current video file."""
        current = self._video_files.get(key)
        scratch = self.root / "videos" / key / f".episode-{index:06d}.mp4"
        write_video(scratch, frames, self.fps, self.video)
        if current is not None:
            path = shard_file(self.root, VIDEO_PATH_V3, current[0], current[1], video_key=key)
            if size_mb(path) + size_mb(scratch) >= self.video_file_size_mb:
                current = None
        if current is None:
            current = (*self._new_file(key), 0)
            # a new file is referenced by no written episode: what a crash left there goes
            shard_file(self.root, VIDEO_PATH_V3, current[0], current[1], video_key=key).unlink(
                missing_ok=True
            )
        chunk, file, frames_before = current
        append_video(shard_file(self.root, VIDEO_PATH_V3, chunk, file, video_key=key), scratch)
        self._video_files[key] = (chunk, file, frames_before + len(frames))
        return {
            video_column(key, "chunk_index"): chunk,
            video_column(key, "file_index"): file,
            video_column(key, "from_timestamp"): frames_before / self.fps,
            video_column(key, "to_timestamp"): (frames_before + len(frames)) / self.fps,
        }

    def info(self) -> dict[str, Any]:
        """The ``meta/info.json`` contents for the episodes written so far (LeRobot 0.4's keys; whole
        numbers as integers, as LeRobot writes them)."""
        video_keys = self._video_keys()
        return {
            "codebase_version": CODEBASE_VERSION_V3,
            "robot_type": self.robot_type,
            "total_episodes": self.num_episodes,
            "total_frames": self.total_frames,
            "total_tasks": len(self.tasks),
            "chunks_size": self.chunks_size,
            "data_files_size_in_mb": _whole(self.data_file_size_mb),
            "video_files_size_in_mb": _whole(self.video_file_size_mb),
            "fps": _whole(self.fps),
            "splits": {"train": f"0:{self.num_episodes}"},
            "data_path": DATA_PATH_V3,
            "video_path": VIDEO_PATH_V3 if video_keys else None,
            "features": self.features or {},
        }

    def dataset_stats(self) -> Stats:
        """``meta/stats.json``: the episodes' stats pooled."""
        return aggregate_stats(self.episodes_stats) if self.episodes_stats else {}

    def _write_meta(self) -> None:
        if self.episodes:
            write_parquet(pa.Table.from_pylist(self.episodes), shard_file(self.root, EPISODES_PATH_V3, 0, 0))
        write_parquet(tasks_table(self.tasks), self.root / TASKS_PATH_V3)
        atomic_write_text(self.root / STATS_PATH, json.dumps(stats_to_json(self.dataset_stats()), indent=4))
        self._write_info()


def _whole(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
