"""What the LeRobot v2.1 and v3.0 writers share: an episode's frame table, the checks before an episode
is written, opening (or resuming) a dataset directory, and closing it.

The two versions lay the frames, videos and meta files out differently; each writer (``LeRobotWriter``,
``LeRobotV3Writer``) subclasses ``LeRobotWriterBase`` with its own ``add_episode``, ``info`` and
meta files.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Self

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_layout import (
    ACTION_KEY,
    DONE_KEY,
    INFO_PATH,
    PRIVILEGED_KEY,
    REWARD_KEY,
    STATE_KEY,
    SUCCESS_KEY,
    atomic_write_text,
    episode_features,
    read_json,
    validate_episode,
)
from vla_rl.data.video import VideoSettings


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


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write ``table`` to ``path`` through a temporary file and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def feature_difference(expected: dict[str, Any], got: dict[str, Any]) -> str:
    """The feature keys missing from ``got``, those it adds, and the specs that differ, for an error."""
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    changed = sorted(key for key in set(expected) & set(got) if expected[key] != got[key])
    parts = [f"missing {missing}" * bool(missing), f"unexpected {extra}" * bool(extra)]
    parts += [f"{key}: {expected[key]} != {got[key]}" for key in changed]
    return "; ".join(part for part in parts if part)


class LeRobotWriterBase(ABC):
    """Append-style writer of a LeRobot dataset directory; subclasses write one codebase version.

    The first episode fixes the features (cameras, shapes, optional columns); later episodes must
    match them. With ``append=True`` an existing dataset at ``root`` is continued; otherwise ``root``
    must not hold a dataset yet. A subclass's constructor calls ``__init__`` here, sets its own state,
    then calls ``_open``, which reads an existing dataset back through ``_load_existing``.
    """

    def __init__(
        self,
        root: str | Path,
        fps: float,
        robot_type: str,
        video: VideoSettings | None,
        feature_names: dict[str, list[str]] | None,
        chunks_size: int,
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
        """The ``info.json`` feature specs; None until the first episode fixes them."""
        self.episodes: list[dict[str, Any]] = []
        """The meta row of every episode written, in episode order."""
        self.tasks: dict[str, int] = {}
        """Instruction -> task index."""
        self.total_frames = 0
        self.closed = False

    def _open(self, append: bool) -> None:
        """Continue the dataset at ``root`` when ``append`` (fail if there is one and not), then make
        sure the directory exists."""
        if (self.root / INFO_PATH).exists():
            if not append:
                raise FileExistsError(
                    f"{self.root / INFO_PATH} exists: pass append=True to add episodes to it"
                )
            self._load_existing(read_json(self.root / INFO_PATH))
        self.root.mkdir(parents=True, exist_ok=True)

    def _resume_info(self, info: dict[str, Any]) -> None:
        """Check the fps of an existing dataset's ``meta/info.json`` ``info``; take its chunk size and
        robot type (the writer's own when it names none)."""
        if float(info["fps"]) != self.fps:
            raise ValueError(
                f"{self.root / INFO_PATH} has fps {info['fps']}, the writer was given {self.fps}"
            )
        self.chunks_size = int(info.get("chunks_size", self.chunks_size))
        self.robot_type = info.get("robot_type") or self.robot_type

    @abstractmethod
    def _load_existing(self, info: dict[str, Any]) -> None:
        """Read the dataset at ``root``, whose ``meta/info.json`` is ``info``, back (features, tasks,
        episodes) to write after it."""

    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    def _video_keys(self) -> list[str]:
        return [key for key, spec in (self.features or {}).items() if spec["dtype"] == "video"]

    def _start_episode(self, episode: Episode) -> tuple[int, int, pa.Table]:
        """Check ``episode`` (the writer open, its fields, its features against the dataset's, which the
        first episode fixes); returns its episode index, its task index (a new instruction takes the
        next one) and its frame table."""
        if self.closed:
            raise RuntimeError(f"the writer of {self.root} is closed")
        validate_episode(episode)
        features = episode_features(episode, self.fps, self.video, self.feature_names)
        if self.features is None:
            self.features = features
        elif features != self.features:
            raise ValueError(
                f"episode features differ from the dataset's: {feature_difference(self.features, features)}"
            )
        index = self.num_episodes
        task_index = self.tasks.setdefault(episode.instruction, len(self.tasks))
        return index, task_index, episode_table(episode, index, self.total_frames, task_index, self.fps)

    @abstractmethod
    def add_episode(self, episode: Episode) -> int:
        """Write one episode; returns its episode index."""

    @abstractmethod
    def info(self) -> dict[str, Any]:
        """The ``meta/info.json`` contents for the episodes written so far."""

    def _write_info(self) -> None:
        atomic_write_text(self.root / INFO_PATH, json.dumps(self.info(), indent=4) + "\n")

    @abstractmethod
    def _write_meta(self) -> None:
        """Rewrite every meta file from memory."""

    def finalize(self) -> None:
        """Make every episode added so far part of the dataset on disk (the v2.1 writer's already are: it
        rewrites the meta files; the v3.0 writer finishes its open files first)."""
        self._write_meta()

    def close(self) -> None:
        """Rewrite every meta file atomically; the dataset is complete afterwards."""
        if not self.closed:
            self._write_meta()
            self.closed = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
