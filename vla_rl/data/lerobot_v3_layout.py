"""The LeRobot v3.0 dataset layout (LeRobot 0.4's format): many episodes per file.

A dataset directory holds::

    meta/info.json                                codebase version, counts, fps, path templates, features
    meta/stats.json                               per-feature stats of the whole dataset
    meta/tasks.parquet                            one row per distinct instruction and its task_index
    meta/episodes/chunk-000/file-000.parquet      one row per episode: tasks, length, where its frames
                                                  and video segments lie, its stats (stats/<feature>/<stat>);
                                                  consecutive episodes, more files as the dataset grows
    data/chunk-000/file-000.parquet               the frames of consecutive episodes
    videos/<video_key>/chunk-000/file-000.mp4     one camera's frames of consecutive episodes

An episode's frames are the rows ``dataset_from_index`` .. ``dataset_to_index - 1`` (global ``index``) of
its data file, and its video frames lie between ``from_timestamp`` and ``to_timestamp`` (seconds) of its
video file. A new data or video file starts when the current one would pass its size cap and whenever a
writer resumes a dataset; a chunk folder holds ``chunks_size`` files.
"""

from __future__ import annotations

from pathlib import Path

CODEBASE_VERSION_V3 = "v3.0"
DEFAULT_CHUNKS_SIZE = 1000
"""Files per chunk folder."""
DEFAULT_DATA_FILE_SIZE_MB = 100.0
"""A data file is closed when the next episode would take it past this size (LeRobot 0.4's default)."""
DEFAULT_VIDEO_FILE_SIZE_MB = 200.0
"""The same for each camera's video files (LeRobot 0.4's default)."""
DATA_PATH_V3 = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH_V3 = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH_V3 = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
EPISODES_DIR_V3 = "meta/episodes"
TASKS_PATH_V3 = "meta/tasks.parquet"
STATS_PATH = "meta/stats.json"
DATASET_QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
"""Quantiles stored with every feature's stats (``q01`` ... ``q99``), the ones LeRobot 0.4 normalises with."""

DATA_CHUNK_KEY = "data/chunk_index"
DATA_FILE_KEY = "data/file_index"
FROM_INDEX_KEY = "dataset_from_index"
TO_INDEX_KEY = "dataset_to_index"
META_CHUNK_KEY = "meta/episodes/chunk_index"
META_FILE_KEY = "meta/episodes/file_index"
STATS_PREFIX = "stats/"
PARTIAL_SUFFIX = ".partial"
"""Added to the name of a data or video file while it is being written: no reader opens such a file, and
no episode in ``meta/`` points into it until it is finished and renamed."""


def video_column(video_key: str, field: str) -> str:
    """Episodes-table column of a camera's ``field``: ``chunk_index``, ``file_index``, ``from_timestamp``,
    ``to_timestamp``."""
    return f"videos/{video_key}/{field}"


def stats_column(feature: str, stat: str) -> str:
    """Episodes-table column holding one stat of one feature for each episode."""
    return f"{STATS_PREFIX}{feature}/{stat}"


def next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) after ``(chunk_index, file_index)``: the next file, or the next chunk's first."""
    if file_index + 1 >= chunks_size:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1


def shard_file(root: Path, template: str, chunk_index: int, file_index: int, **keys: str) -> Path:
    """``root`` / ``template`` (``DATA_PATH_V3``, ``VIDEO_PATH_V3``, ``EPISODES_PATH_V3``) filled in."""
    return root / template.format(chunk_index=chunk_index, file_index=file_index, **keys)


def size_mb(path: Path) -> float:
    """Size of the file at ``path`` in MiB, 0 when it does not exist."""
    return path.stat().st_size / 2**20 if path.is_file() else 0.0


def partial_path(path: Path) -> Path:
    """Where the data or video file that will become ``path`` is written until it is finished."""
    return path.with_name(path.name + PARTIAL_SUFFIX)
