"""Read LeRobot v3.0 dataset directories (ours or LeRobot 0.4's) back into Episodes.

The same episode interface as the v2.x reader (``LeRobotDataset``), whose column-to-Episode mapping
it shares: only where an episode's rows, videos, tasks and stats lie differs. Episode ``i``'s rows
are those of its data file with ``episode_index == i``; its camera frames are the video file's
frames from ``from_timestamp`` for ``length`` frames.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from vla_rl.data.lerobot_layout import INFO_PATH, read_json
from vla_rl.data.lerobot_reader import LeRobotDataset, decode_image_column
from vla_rl.data.lerobot_v3_layout import (
    DATA_CHUNK_KEY,
    DATA_FILE_KEY,
    DATA_PATH_V3,
    DEFAULT_CHUNKS_SIZE,
    EPISODES_DIR_V3,
    STATS_PATH,
    STATS_PREFIX,
    VIDEO_PATH_V3,
    video_column,
)
from vla_rl.data.lerobot_v3_stats import Stats, stats_from_columns
from vla_rl.data.lerobot_v3_tasks import read_tasks
from vla_rl.data.stats import stats_from_json
from vla_rl.data.video_shards import read_video_frames


def read_episode_rows(root: Path, with_stats: bool = False) -> list[dict[str, Any]]:
    """Rows of every ``meta/episodes/chunk-*/file-*.parquet`` sorted by ``episode_index`` (the
    ``stats/...`` columns only when asked: they are most of the table)."""
    files = sorted((root / EPISODES_DIR_V3).glob("chunk-*/file-*.parquet"))
    if not files:
        raise FileNotFoundError(f"dataset {root} has no {EPISODES_DIR_V3}/chunk-*/file-*.parquet")
    rows: list[dict[str, Any]] = []
    for path in files:
        names = pq.read_schema(path).names
        columns = names if with_stats else [name for name in names if not name.startswith(STATS_PREFIX)]
        rows += pq.read_table(path, columns=columns).to_pylist()
    return sorted(rows, key=lambda row: int(row["episode_index"]))


class LeRobotV3Dataset(LeRobotDataset):
    """A LeRobot v3.0 dataset directory on disk, read lazily one episode at a time."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"dataset directory {self.root} does not exist")
        self.info = read_json(self.root / INFO_PATH)
        version = str(self.info.get("codebase_version", ""))
        if not version.startswith("v3"):
            raise ValueError(
                f"{self.root / INFO_PATH}: codebase_version {version!r} is not a LeRobot v3.x layout"
            )
        for key in ("fps", "features"):
            if key not in self.info:
                raise ValueError(f"{self.root / INFO_PATH} has no {key!r} entry")
        self.features: dict[str, dict[str, Any]] = self.info["features"]
        self.chunks_size = int(self.info.get("chunks_size", DEFAULT_CHUNKS_SIZE))
        self.data_path = self.info.get("data_path") or DATA_PATH_V3
        self.video_path = self.info.get("video_path") or VIDEO_PATH_V3
        self._cached_file: tuple[Path, pa.Table] | None = None

    @cached_property
    def episode_rows(self) -> list[dict[str, Any]]:
        """The episodes table's rows without their stats columns (none for a dataset without episodes)."""
        return read_episode_rows(self.root) if self.info.get("total_episodes", 1) else []

    @cached_property
    def tasks(self) -> dict[int, str]:
        """task_index -> instruction."""
        return read_tasks(self.root)

    def episode_path(self, position: int) -> Path:
        """Data file holding the ``position``-th episode's rows."""
        row = self.episode_rows[position]
        chunk, file = int(row[DATA_CHUNK_KEY]), int(row[DATA_FILE_KEY])
        return self.root / self.data_path.format(chunk_index=chunk, file_index=file)

    def video_file(self, position: int, key: str) -> Path:
        row = self.episode_rows[position]
        chunk, file = int(row[video_column(key, "chunk_index")]), int(row[video_column(key, "file_index")])
        return self.root / self.video_path.format(video_key=key, chunk_index=chunk, file_index=file)

    def _read_file(self, path: Path) -> pa.Table:
        """A whole data file, kept until another one is read (consecutive episodes share files)."""
        if self._cached_file is None or self._cached_file[0] != path:
            if not path.is_file():
                raise FileNotFoundError(f"dataset file {path} does not exist")
            self._cached_file = (path, pq.read_table(path))
        return self._cached_file[1]

    def _read_table(self, position: int, column: str | None = None) -> pa.Table:
        """The ``position``-th episode's rows (only ``column`` when one is named), in frame order."""
        path = self.episode_path(position)
        table = self._read_file(path)
        if column is not None and column not in table.column_names:
            raise ValueError(f"{path} has no {column!r} column")
        episode_index = int(self.episode_rows[position]["episode_index"])
        table = table.filter(pc.equal(table.column("episode_index"), episode_index))
        if "frame_index" in table.column_names:
            table = table.sort_by("frame_index")
        return table if column is None else table.select([column])

    def _images(self, position: int, table: pa.Table, length: int) -> dict[str, np.ndarray]:
        images = {}
        row = self.episode_rows[position]
        for camera, key in self.cameras.items():
            if self.features[key]["dtype"] == "video":
                path = self.video_file(position, key)
                first = round(float(row[video_column(key, "from_timestamp")]) * self.fps)
                last = round(float(row[video_column(key, "to_timestamp")]) * self.fps)
                if last - first != length:
                    raise ValueError(
                        f"{path}: episode {row['episode_index']} spans {last - first} video frames of camera "
                        f"{camera!r}, the episode has {length}"
                    )
                images[camera] = read_video_frames(path, first, length, self.fps)
            elif key in table.column_names:
                images[camera] = decode_image_column(table.column(key), self.root)
        return images

    def episode_stats(self, position: int) -> Stats:
        """Stored per-feature stats of one episode (the episodes table's ``stats/...`` columns)."""
        index = int(self.episode_rows[position]["episode_index"])
        rows = {int(row["episode_index"]): row for row in read_episode_rows(self.root, with_stats=True)}
        return stats_from_columns(rows[index])

    def dataset_stats(self) -> Stats:
        """``meta/stats.json``: per-feature stats of the whole dataset."""
        return stats_from_json(read_json(self.root / STATS_PATH))
