"""Read LeRobot v2.x dataset directories (ours or other tools') back into Episodes.

Columns map onto Episode fields: ``observation.state`` -> proprio, ``observation.privileged`` ->
privileged, ``action`` -> actions, ``next.reward`` -> rewards, ``next.success`` ->
success_per_step, ``observation.images.<camera>`` (video or image features) -> images[camera];
any other per-frame column lands in ``extras``. Only ``meta/info.json``, the parquet files and
the ``action`` column are required. The names openpi's LIBERO conversion writes are read too:
``state`` and ``actions`` where ``observation.state`` and ``action`` are absent, and bare camera
features (``image``, ``wrist_image``) as cameras of that name.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_layout import (
    ACTION_KEY,
    ACTION_KEY_ALIASES,
    DATA_PATH,
    DEFAULT_CHUNKS_SIZE,
    DONE_KEY,
    EPISODES_PATH,
    EPISODES_STATS_PATH,
    INDEX_KEYS,
    INFO_PATH,
    PRIVILEGED_KEY,
    REWARD_KEY,
    STATE_KEY,
    STATE_KEY_ALIASES,
    SUCCESS_KEY,
    TASKS_PATH,
    VIDEO_PATH,
    VISUAL_DTYPES,
    camera_of_feature,
    camera_of_key,
    episode_file,
    read_json,
    read_jsonl,
)
from vla_rl.data.stats import stats_from_json, summary_stats
from vla_rl.data.video import read_video

MAPPED_KEYS = {STATE_KEY, PRIVILEGED_KEY, ACTION_KEY, REWARD_KEY, SUCCESS_KEY, DONE_KEY, *INDEX_KEYS}


def column_to_numpy(column: pa.ChunkedArray | pa.Array, shape: list[int] | None = None) -> np.ndarray:
    """A parquet column as a writable [T, *shape] (list columns) or [T] (scalar columns) array."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    rows = len(column)
    if _is_list(column.type):
        values = column.flatten()
        while _is_list(values.type):
            values = values.flatten()
        flat = values.to_numpy(zero_copy_only=False)
        if rows and flat.size % rows:
            raise ValueError(f"list column of {rows} rows holds {flat.size} values: rows differ in length")
        feature_shape = list(shape) if shape and int(np.prod(shape)) * rows == flat.size else [-1]
        result = flat.reshape(rows, *feature_shape)
    else:
        result = column.to_numpy(zero_copy_only=False)
        if shape and list(shape) != [1] and int(np.prod(shape)) == 1:
            result = result.reshape(rows, *shape)
    return result if result.flags.writeable else result.copy()


def _is_list(dtype: pa.DataType) -> bool:
    return pa.types.is_list(dtype) or pa.types.is_large_list(dtype) or pa.types.is_fixed_size_list(dtype)


def decode_image_column(column: pa.ChunkedArray, root: Path) -> np.ndarray:
    """Frames of an ``image`` feature stored in parquet as ``{bytes, path}`` structs (PNG/JPEG)."""
    import imageio.v3 as iio

    frames = []
    for cell in column.to_pylist():
        data = cell.get("bytes") if isinstance(cell, dict) else cell
        source = io.BytesIO(data) if data else root / cell["path"]
        frames.append(np.asarray(iio.imread(source))[..., :3])
    return np.stack(frames).astype(np.uint8, copy=False)


class LeRobotDataset:
    """A LeRobot v2.x dataset directory on disk, read lazily one episode at a time."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"dataset directory {self.root} does not exist")
        self.info = read_json(self.root / INFO_PATH)
        version = str(self.info.get("codebase_version", "v2.1"))
        if not version.startswith("v2"):
            raise ValueError(
                f"{self.root / INFO_PATH}: codebase_version {version!r} is not supported "
                "(LeRobot v2.x layouts only)"
            )
        for key in ("fps", "features"):
            if key not in self.info:
                raise ValueError(f"{self.root / INFO_PATH} has no {key!r} entry")
        self.features: dict[str, dict[str, Any]] = self.info["features"]
        self.chunks_size = int(self.info.get("chunks_size", DEFAULT_CHUNKS_SIZE))
        self.data_path = self.info.get("data_path") or DATA_PATH
        self.video_path = self.info.get("video_path") or VIDEO_PATH

    @property
    def fps(self) -> float:
        return float(self.info["fps"])

    @cached_property
    def episode_rows(self) -> list[dict[str, Any]]:
        """``meta/episodes.jsonl`` rows, or bare indices from ``total_episodes`` when it is absent."""
        path = self.root / EPISODES_PATH
        if path.is_file():
            return sorted(read_jsonl(path), key=lambda row: int(row["episode_index"]))
        if "total_episodes" not in self.info:
            raise FileNotFoundError(f"dataset file {path} does not exist and info.json has no total_episodes")
        return [{"episode_index": index} for index in range(int(self.info["total_episodes"]))]

    @cached_property
    def tasks(self) -> dict[int, str]:
        """task_index -> instruction (empty when ``meta/tasks.jsonl`` is absent)."""
        path = self.root / TASKS_PATH
        rows = read_jsonl(path) if path.is_file() else []
        return {int(row["task_index"]): str(row["task"]) for row in rows}

    @property
    def num_episodes(self) -> int:
        return len(self.episode_rows)

    @property
    def num_frames(self) -> int:
        if all("length" in row for row in self.episode_rows):
            return sum(int(row["length"]) for row in self.episode_rows)
        return int(self.info.get("total_frames", 0))

    @property
    def cameras(self) -> dict[str, str]:
        """Camera name -> feature key of every video or image feature."""
        return {
            camera: key
            for key, spec in self.features.items()
            if spec.get("dtype") in VISUAL_DTYPES and (camera := camera_of_feature(key)) is not None
        }

    @cached_property
    def action_key(self) -> str:
        """The column read as the actions: the first of ``ACTION_KEY_ALIASES`` among the features."""
        return next((key for key in ACTION_KEY_ALIASES if key in self.features), ACTION_KEY)

    @cached_property
    def state_key(self) -> str:
        """The column read as the proprio state: the first of ``STATE_KEY_ALIASES`` among the features."""
        return next((key for key in STATE_KEY_ALIASES if key in self.features), STATE_KEY)

    def __len__(self) -> int:
        return self.num_episodes

    def episode_path(self, position: int) -> Path:
        """Parquet file of the ``position``-th episode."""
        index = int(self.episode_rows[position]["episode_index"])
        return episode_file(self.root, self.data_path, index, self.chunks_size)

    def video_file(self, position: int, key: str) -> Path:
        index = int(self.episode_rows[position]["episode_index"])
        return episode_file(self.root, self.video_path, index, self.chunks_size, video_key=key)

    def _read_table(self, position: int, column: str | None = None) -> pa.Table:
        """The ``position``-th episode's parquet table (only ``column`` when one is named), in frame order."""
        path = self.episode_path(position)
        if not path.is_file():
            raise FileNotFoundError(f"dataset file {path} does not exist")
        if column is not None and column not in pq.read_schema(path).names:
            raise ValueError(f"{path} has no {column!r} column")
        table = pq.read_table(path, columns=None if column is None else [column])
        if "frame_index" in table.column_names:
            table = table.sort_by("frame_index")
        return table

    def _shape(self, key: str) -> list[int] | None:
        return self.features.get(key, {}).get("shape")

    def episode(self, position: int) -> Episode:
        """The ``position``-th episode (0 .. num_episodes - 1) with its images decoded."""
        if not -self.num_episodes <= position < self.num_episodes:
            raise IndexError(f"episode {position} out of range: the dataset has {self.num_episodes}")
        position %= self.num_episodes
        table = self._read_table(position)
        names = table.column_names
        if self.action_key not in names:
            raise ValueError(
                f"{self.episode_path(position)} has no {self.action_key!r} column (columns: {names})"
            )

        def column(key: str, dtype: type, matrix: bool = False) -> np.ndarray | None:
            if key not in names:
                return None
            values = column_to_numpy(table.column(key), self._shape(key)).astype(dtype, copy=False)
            return values.reshape(len(values), -1) if matrix else values

        actions = column(self.action_key, np.float32, matrix=True)
        length = len(actions)
        proprio = column(self.state_key, np.float32, matrix=True)
        success_per_step = column(SUCCESS_KEY, bool)
        images = self._images(position, table, length)
        mapped = {*MAPPED_KEYS, self.action_key, self.state_key, *self.cameras.values()}
        extras = {
            key: column_to_numpy(table.column(key), self._shape(key))
            for key in names
            if key not in mapped and camera_of_key(key) is None
        }
        return Episode(
            images=images,
            proprio=proprio if proprio is not None else np.zeros((length, 0), np.float32),
            actions=actions,
            instruction=self._instruction(position, table),
            success=self._success(position, success_per_step),
            rewards=column(REWARD_KEY, np.float32),
            privileged=column(PRIVILEGED_KEY, np.float32, matrix=True),
            success_per_step=success_per_step,
            extras=extras,
        )

    def _images(self, position: int, table: pa.Table, length: int) -> dict[str, np.ndarray]:
        images = {}
        for camera, key in self.cameras.items():
            if self.features[key]["dtype"] == "video":
                path = self.video_file(position, key)
                frames = read_video(path)
            elif key in table.column_names:
                path = self.episode_path(position)
                frames = decode_image_column(table.column(key), self.root)
            else:
                continue
            if len(frames) != length:
                raise ValueError(
                    f"{path}: {len(frames)} frames for camera {camera!r}, the episode has {length}"
                )
            images[camera] = frames
        return images

    def _instruction(self, position: int, table: pa.Table) -> str:
        if "task_index" in table.column_names and len(table) and self.tasks:
            task_index = int(table.column("task_index")[0].as_py())
            if task_index in self.tasks:
                return self.tasks[task_index]
        row_tasks = self.episode_rows[position].get("tasks") or [""]
        return str(row_tasks[0])

    def _success(self, position: int, success_per_step: np.ndarray | None) -> bool:
        """``success`` from episodes.jsonl, else the last ``next.success``, else True (a demonstration)."""
        row = self.episode_rows[position]
        if "success" in row:
            return bool(row["success"])
        if success_per_step is not None and len(success_per_step):
            return bool(success_per_step[-1])
        return True

    def episodes(self) -> Iterator[Episode]:
        """Every episode in index order."""
        for position in range(self.num_episodes):
            yield self.episode(position)

    def episode_stats(self, position: int) -> dict[str, dict[str, np.ndarray]]:
        """Stored per-feature stats of one episode from ``meta/episodes_stats.jsonl``."""
        index = int(self.episode_rows[position]["episode_index"])
        rows = {
            int(row["episode_index"]): row["stats"] for row in read_jsonl(self.root / EPISODES_STATS_PATH)
        }
        if index not in rows:
            raise KeyError(f"{self.root / EPISODES_STATS_PATH} has no stats for episode {index}")
        return stats_from_json(rows[index])

    def column(self, key: str) -> np.ndarray:
        """One per-frame column concatenated over all episodes ([total_frames, ...])."""
        parts = [
            column_to_numpy(self._read_table(position, key).column(key), self._shape(key))
            for position in range(self.num_episodes)
        ]
        if not parts:
            raise ValueError(f"dataset {self.root} has no episodes")
        return np.concatenate(parts)

    def action_stats(self, quantiles: tuple[float, ...] = (0.01, 0.99)) -> dict[str, np.ndarray]:
        """Per-dimension min/max/mean/std/q01/q99 of the actions of all frames (float64 [A] each)."""
        actions = self.column(self.action_key)
        return summary_stats(actions.reshape(len(actions), -1), quantiles)

    def state_stats(self, quantiles: tuple[float, ...] = (0.01, 0.99)) -> dict[str, np.ndarray]:
        """The same statistics for ``observation.state`` (proprio normalisation)."""
        state = self.column(self.state_key)
        return summary_stats(state.reshape(len(state), -1), quantiles)
