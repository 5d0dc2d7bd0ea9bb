"""Write Episodes as a LeRobot v3.0 dataset (LeRobot 0.4's format), one episode at a time.

The current data file and each camera's current video file stay open while episodes come: an episode's
rows are written to the data file as row groups (``ParquetStream``) and its frames are piped to a
running ffmpeg (``VideoStream``), both under ``.partial`` names, so adding an episode costs the same
however large the files already are. ``finalize`` finishes the open files, renames them into place and
then writes the meta files atomically (the current ``meta/episodes`` file, at most
``EPISODES_PER_META_FILE`` rows; the tasks; the stats, the new episodes' pooled into a running total;
``meta/info.json``), so a finalise too costs the same at any dataset size: only then do the new
episodes belong to the dataset. The writer finalises every ``finalize_every_episodes``
episodes, when a file reaches its size cap (the next episodes start new files) and on ``close``; a
crash loses the episodes since the last finalise and leaves a dataset that reads as it was then. A
resumed writer (``append=True``) removes the files no episode points to (what a crash left) and starts
new data, video and episodes files, as LeRobot does.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_format import DEFAULT_FINALIZE_EVERY_EPISODES
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
    PARTIAL_SUFFIX,
    STATS_PATH,
    TASKS_PATH_V3,
    TO_INDEX_KEY,
    VIDEO_PATH_V3,
    next_file,
    shard_file,
    video_column,
)
from vla_rl.data.lerobot_v3_reader import read_episode_rows
from vla_rl.data.lerobot_v3_stats import (
    Stats,
    aggregate_stats,
    frame_stats,
    stats_from_columns,
    stats_to_columns,
    vector_stats,
)
from vla_rl.data.lerobot_v3_tasks import read_tasks, tasks_table
from vla_rl.data.lerobot_writer_base import LeRobotWriterBase, write_parquet
from vla_rl.data.parquet_shards import ParquetStream
from vla_rl.data.stats import stats_to_json
from vla_rl.data.video import VideoSettings
from vla_rl.data.video_shards import VideoStream

log = logging.getLogger(__name__)

EPISODES_PER_META_FILE = 200
"""Rows of one ``meta/episodes`` file: a finalise rewrites the current one only, so its cost stays
bounded however many episodes the dataset holds (the next episode starts a new file)."""
SHARD_NAME = re.compile(r"chunk-(\d+)/file-(\d+)\.(parquet|mp4)")
"""The chunk and file numbers in a data or video file's path (finished or ``.partial``)."""


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
        finalize_every_episodes: int = DEFAULT_FINALIZE_EVERY_EPISODES,
    ) -> None:
        super().__init__(root, fps, robot_type, video, feature_names, chunks_size)
        if chunks_size <= 0 or data_file_size_mb <= 0 or video_file_size_mb <= 0:
            raise ValueError("chunks_size and the file size caps must be > 0")
        if finalize_every_episodes < 0:
            raise ValueError(f"finalize_every_episodes must be >= 0, got {finalize_every_episodes}")
        self.data_file_size_mb = float(data_file_size_mb)
        self.video_file_size_mb = float(video_file_size_mb)
        self.finalize_every_episodes = finalize_every_episodes
        """Finalise after this many episodes since the last finalise; 0: only at size caps and ``close``."""
        self.episodes_stats: list[Stats] = []
        """The stats of every episode written (its row in ``episodes`` holds them as columns too)."""
        self._data: tuple[tuple[int, int], ParquetStream] | None = None
        """(chunk, file) and writer of the open data file; None: the next episode starts a new one."""
        self._videos: dict[str, tuple[tuple[int, int], VideoStream]] = {}
        """Video key -> (chunk, file) and encoder of its open video file."""
        self._last_files: dict[str, tuple[int, int]] = {}
        """Data, video and ``meta`` keys -> the (chunk, file) used last, from which new files count on."""
        self._meta_first = 0
        """Episode index of the first row of the current ``meta/episodes`` file."""
        self._meta_schema: pa.Schema | None = None
        """The existing episodes tables' columns when a dataset is resumed (new rows keep to them)."""
        self._pooled: Stats = {}
        """The stats of the episodes up to the last finalise, pooled (``meta/stats.json``)."""
        self._open(append)
        self._remove_unreferenced_files()
        self._finalized = self._state()
        """The state as of the last finalise (what a failed episode rolls back to)."""

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
        for key, chunk_file in self._referenced_files().items():
            self._last_files[key] = max(chunk_file)
        if self.episodes:
            last = max((int(row[META_CHUNK_KEY]), int(row[META_FILE_KEY])) for row in self.episodes)
            self._last_files["meta"] = last
            self._meta_schema = pq.read_schema(shard_file(self.root, EPISODES_PATH_V3, *last))
        self._meta_first = len(self.episodes)  # a resumed writer starts a new episodes file
        self._pooled = aggregate_stats(self.episodes_stats) if self.episodes_stats else {}

    def _referenced_files(self) -> dict[str, set[tuple[int, int]]]:
        """Data (key ``data``) and video keys -> the (chunk, file) pairs the episodes point to."""
        files: dict[str, set[tuple[int, int]]] = {}
        for row in self.episodes:
            files.setdefault("data", set()).add((int(row[DATA_CHUNK_KEY]), int(row[DATA_FILE_KEY])))
            for key in self._video_keys():
                chunk_file = (
                    int(row[video_column(key, "chunk_index")]),
                    int(row[video_column(key, "file_index")]),
                )
                files.setdefault(key, set()).add(chunk_file)
        return files

    def _remove_unreferenced_files(self) -> None:
        """Remove the data and video files (finished or ``.partial``) that no episode points to: what a
        crash left between two finalises or during one."""
        referenced = self._referenced_files()
        candidates = [("data", path) for path in self.root.glob("data/chunk-*/file-*.parquet*")]
        for folder in self.root.glob("videos/*"):
            candidates += [(folder.name, path) for path in folder.glob("chunk-*/file-*.mp4*")]
        for key, path in candidates:
            name = path.relative_to(path.parents[1]).as_posix()
            match = SHARD_NAME.fullmatch(name.removesuffix(PARTIAL_SUFFIX))
            if match is None:
                continue
            finished = not name.endswith(PARTIAL_SUFFIX)
            if not finished or (int(match.group(1)), int(match.group(2))) not in referenced.get(key, set()):
                log.warning(
                    "%s: removing %s, which no episode in meta/ points to (left by a crash)",
                    self.root,
                    path.relative_to(self.root),
                )
                path.unlink()

    def _new_file(self, key: str) -> tuple[int, int]:
        last = self._last_files.get(key)
        chunk_file = (0, 0) if last is None else next_file(*last, self.chunks_size)
        self._last_files[key] = chunk_file
        return chunk_file

    def add_episode(self, episode: Episode) -> int:
        """Write one episode's frames and videos to the open files; returns its episode index. It is in
        the dataset on disk after the next ``finalize`` (which this call runs every
        ``finalize_every_episodes`` episodes). If writing fails, the episodes since the last finalise are
        dropped (as a crash would lose them) and the error is raised."""
        if self._files_full():
            self.finalize()
        index, _, table = self._start_episode(episode)
        try:
            row: dict[str, Any] = {
                "episode_index": index,
                "tasks": [episode.instruction],
                "length": len(episode),
                **self._write_frames(table),
            }
            for camera, frames in sorted(episode.images.items()):
                row.update(self._write_video(camera_key(camera), frames))
        except BaseException:
            self._roll_back()
            raise
        stats = episode_stats_v3(table, episode)
        if index == self._meta_first or index - self._meta_first >= EPISODES_PER_META_FILE:
            self._meta_first = index
            self._new_file("meta")
        meta_chunk, meta_file = self._last_files["meta"]
        row.update({META_CHUNK_KEY: meta_chunk, META_FILE_KEY: meta_file, "success": bool(episode.success)})
        row.update(stats_to_columns(stats))
        self.episodes.append(row)
        self.episodes_stats.append(stats)
        self.total_frames += len(episode)
        if (
            self.finalize_every_episodes
            and self.num_episodes - self._finalized[0] >= self.finalize_every_episodes
        ):
            self.finalize()
        return index

    def _files_full(self) -> bool:
        """Whether the open data file or a video file has reached its size cap."""
        if self._data is not None and self._data[1].size_mb() >= self.data_file_size_mb:
            return True
        return any(stream.size_mb() >= self.video_file_size_mb for _, stream in self._videos.values())

    def _write_frames(self, table: pa.Table) -> dict[str, int]:
        """Append the episode's rows to the open data file (opening a new one if none is)."""
        if self._data is None:
            chunk_file = self._new_file("data")
            self._data = (chunk_file, ParquetStream(shard_file(self.root, DATA_PATH_V3, *chunk_file)))
        (chunk, file), stream = self._data
        stream.add(table)
        first = int(table.column("index")[0].as_py())
        return {
            DATA_CHUNK_KEY: chunk,
            DATA_FILE_KEY: file,
            FROM_INDEX_KEY: first,
            TO_INDEX_KEY: first + len(table),
        }

    def _write_video(self, key: str, frames: Any) -> dict[str, Any]:
        """Send the episode's frames to the camera's open video file (opening a new one if none is)."""
        if key not in self._videos:
            chunk_file = self._new_file(key)
            path = shard_file(self.root, VIDEO_PATH_V3, *chunk_file, video_key=key)
            self._videos[key] = (chunk_file, VideoStream(path, self.fps, self.video))
        (chunk, file), stream = self._videos[key]
        first = stream.add(frames)
        return {
            video_column(key, "chunk_index"): chunk,
            video_column(key, "file_index"): file,
            video_column(key, "from_timestamp"): first / self.fps,
            video_column(key, "to_timestamp"): (first + len(frames)) / self.fps,
        }

    def finalize(self) -> None:
        """Finish the open data and video files, move them into place, then rewrite the meta files: every
        episode added so far is in the dataset on disk, readable by LeRobot. The next episode starts new
        files. If a file cannot be finished, the episodes since the last finalise are dropped; if the meta
        files cannot be written, the finished files stay and the next finalise writes them again."""
        try:
            if self._data is not None:
                self._data[1].finish()
            for _, stream in self._videos.values():
                stream.finish()
        except BaseException:
            self._roll_back()  # the files finished so far go too: no episode in meta/ points into them
            raise
        self._data, self._videos = None, {}
        self._write_meta()
        self._finalized = self._state()

    def _state(self) -> tuple[int, dict[str, int], int, dict[str, tuple[int, int]], int]:
        """Episodes, tasks, frames, the last file numbers and the current episodes file's first row, to
        roll back to."""
        return (
            self.num_episodes,
            dict(self.tasks),
            self.total_frames,
            dict(self._last_files),
            self._meta_first,
        )

    def _roll_back(self) -> None:
        """Discard the open files and forget the episodes written since the last finalise."""
        if self._data is not None:
            self._data[1].discard()
        for _, stream in self._videos.values():
            stream.discard()
        self._data, self._videos = None, {}
        count, tasks, frames, last_files, meta_first = self._finalized
        del self.episodes[count:], self.episodes_stats[count:]
        self.tasks, self.total_frames, self._last_files = dict(tasks), frames, dict(last_files)
        self._meta_first = meta_first

    def close(self) -> None:
        """Finalise; the writer takes no more episodes."""
        if not self.closed:
            self.finalize()
            self.closed = True

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

    def _write_meta(self) -> None:
        """Rewrite the episodes files that rows were added to since the last finalise (the current one,
        and the one before when it filled up since), the tasks, the pooled stats and ``info.json``."""
        since = self._finalized[0]
        new = self.episodes[since:]
        for chunk_file in sorted({_meta_file(row) for row in new}):
            window = self.episodes[-EPISODES_PER_META_FILE - len(new) :]  # holds every row of those files
            self._write_episodes_file([row for row in window if _meta_file(row) == chunk_file], chunk_file)
        pooled = self._pooled
        if new:
            pooled = aggregate_stats(
                [pooled, *self.episodes_stats[since:]] if pooled else self.episodes_stats[since:]
            )
        write_parquet(tasks_table(self.tasks), self.root / TASKS_PATH_V3)
        atomic_write_text(self.root / STATS_PATH, json.dumps(stats_to_json(pooled), indent=4))
        self._write_info()
        self._pooled = pooled  # only now: a finalise that failed above pools the same episodes again

    def _write_episodes_file(self, rows: list[dict[str, Any]], chunk_file: tuple[int, int]) -> None:
        table = pa.Table.from_pylist(rows)
        if self._meta_schema is not None:  # a resumed dataset: the new files keep the existing files' columns
            columns = [
                table.column(field.name).cast(field.type)
                if field.name in table.column_names
                else pa.nulls(len(table), field.type)
                for field in self._meta_schema
            ]
            table = pa.Table.from_arrays(columns, schema=self._meta_schema.remove_metadata())
        write_parquet(table, shard_file(self.root, EPISODES_PATH_V3, *chunk_file))


def _meta_file(row: dict[str, Any]) -> tuple[int, int]:
    return int(row[META_CHUNK_KEY]), int(row[META_FILE_KEY])


def _whole(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
