"""The LeRobot v2.1 dataset layout: paths, feature keys, feature specs and meta-file I/O.

A dataset directory holds::

    meta/info.json                 codebase version, counts, fps, path templates, features
    meta/episodes.jsonl            {"episode_index", "tasks", "length"} per episode
    meta/tasks.jsonl               {"task_index", "task"} per distinct instruction
    meta/episodes_stats.jsonl      {"episode_index", "stats": {feature: {min, max, mean, std, count}}}
    data/chunk-000/episode_000000.parquet
    videos/chunk-000/observation.images.front/episode_000000.mp4

Episodes are grouped in chunks of ``chunks_size`` (1000) by index.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from vla_rl.data.episode import Episode
from vla_rl.data.video import VideoSettings

CODEBASE_VERSION = "v2.1"
DEFAULT_CHUNKS_SIZE = 1000
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
VIDEO_PATH = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
INFO_PATH = "meta/info.json"
EPISODES_PATH = "meta/episodes.jsonl"
TASKS_PATH = "meta/tasks.jsonl"
EPISODES_STATS_PATH = "meta/episodes_stats.jsonl"

STATE_KEY = "observation.state"
PRIVILEGED_KEY = "observation.privileged"
ACTION_KEY = "action"
IMAGES_PREFIX = "observation.images."
SINGLE_IMAGE_KEY = "observation.image"
"""Some datasets (e.g. single-camera ones) store their only camera under this key."""
SINGLE_IMAGE_CAMERA = "image"
STATE_KEY_ALIASES = (STATE_KEY, "state")
"""Column names read as the proprio state, the first present: ``state`` is what openpi's LIBERO
conversion (``physical-intelligence/libero``) writes."""
ACTION_KEY_ALIASES = (ACTION_KEY, "actions")
"""Column names read as the actions, the first present (``actions``: openpi's LIBERO conversion)."""
REWARD_KEY = "next.reward"
DONE_KEY = "next.done"
SUCCESS_KEY = "next.success"
INDEX_KEYS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
VISUAL_DTYPES = ("video", "image")


def camera_key(camera: str) -> str:
    return IMAGES_PREFIX + camera


def camera_of_key(key: str) -> str | None:
    """Camera name of an image feature key (``observation.images.front`` -> ``front``), else None."""
    if key.startswith(IMAGES_PREFIX):
        return key[len(IMAGES_PREFIX) :]
    return SINGLE_IMAGE_CAMERA if key == SINGLE_IMAGE_KEY else None


def camera_of_feature(key: str) -> str | None:
    """Camera name of a video or image feature: ``camera_of_key``'s, else the key itself when it is a
    bare name (``image``, ``wrist_image``: the top-level camera features of openpi's LIBERO
    conversion); None for a dotted key outside ``observation.images.``."""
    camera = camera_of_key(key)
    if camera is None and "." not in key:
        return key
    return camera


def episode_file(root: Path, template: str, episode_index: int, chunks_size: int, **keys: str) -> Path:
    """``root`` / the path ``template`` (``DATA_PATH``, ``VIDEO_PATH``) gives episode ``episode_index``,
    which lies in chunk ``episode_index // chunks_size``."""
    chunk = episode_index // chunks_size
    return root / template.format(episode_chunk=chunk, episode_index=episode_index, **keys)


def _vector_spec(array: np.ndarray, names: list[str] | None) -> dict[str, Any]:
    shape = list(array.shape[1:]) or [1]
    if names is not None and len(names) != int(np.prod(shape)):
        raise ValueError(f"{len(names)} feature names given for a feature of shape {shape}")
    return {"dtype": str(array.dtype), "shape": shape, "names": names}


def video_spec(frames: np.ndarray, fps: float, video: VideoSettings) -> dict[str, Any]:
    height, width, channels = frames.shape[1:]
    return {
        "dtype": "video",
        "shape": [height, width, channels],
        "names": ["height", "width", "channels"],
        "info": {
            "video.fps": float(fps),
            "video.height": height,
            "video.width": width,
            "video.channels": channels,
            "video.codec": video.codec_name,
            "video.pix_fmt": video.pix_fmt,
            "video.is_depth_map": False,
            "has_audio": False,
        },
    }


def scalar_spec(dtype: str) -> dict[str, Any]:
    return {"dtype": dtype, "shape": [1], "names": None}


def episode_features(
    episode: Episode, fps: float, video: VideoSettings, names: dict[str, list[str]] | None = None
) -> dict[str, dict[str, Any]]:
    """The ``info.json`` feature specs describing the columns and videos written for ``episode``."""
    names = names or {}
    features: dict[str, dict[str, Any]] = {}
    for camera in sorted(episode.images):
        features[camera_key(camera)] = video_spec(episode.images[camera], fps, video)
    features[STATE_KEY] = _vector_spec(episode.proprio, names.get(STATE_KEY))
    if episode.privileged is not None:
        features[PRIVILEGED_KEY] = _vector_spec(episode.privileged, names.get(PRIVILEGED_KEY))
    features[ACTION_KEY] = _vector_spec(episode.actions, names.get(ACTION_KEY))
    for key in sorted(episode.extras):
        features[key] = _vector_spec(episode.extras[key], names.get(key))
    features["timestamp"] = scalar_spec("float32")
    for key in ("frame_index", "episode_index", "index", "task_index"):
        features[key] = scalar_spec("int64")
    if episode.rewards is not None:
        features[REWARD_KEY] = scalar_spec("float32")
    features[DONE_KEY] = scalar_spec("bool")
    features[SUCCESS_KEY] = scalar_spec("bool")
    return features


def validate_episode(episode: Episode) -> None:
    """Raise ``ValueError`` naming the field whose shape or length does not fit the episode."""
    actions = np.asarray(episode.actions)
    if actions.ndim != 2 or len(actions) == 0:
        raise ValueError(f"episode actions must be a non-empty [T, A] array, got shape {actions.shape}")
    length = len(actions)
    per_step: dict[str, np.ndarray | None] = {
        "proprio": episode.proprio,
        "rewards": episode.rewards,
        "privileged": episode.privileged,
        "success_per_step": episode.success_per_step,
        **{f"images[{camera!r}]": frames for camera, frames in episode.images.items()},
        **{f"extras[{key!r}]": value for key, value in episode.extras.items()},
    }
    for name, value in per_step.items():
        if value is not None and len(value) != length:
            raise ValueError(f"episode {name} has {len(value)} rows but actions have {length}")
    if np.asarray(episode.proprio).ndim != 2:
        raise ValueError(f"episode proprio must be [T, P], got shape {np.asarray(episode.proprio).shape}")
    for camera, frames in episode.images.items():
        frames = np.asarray(frames)
        if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(
                f"episode images[{camera!r}] must be uint8 [T, H, W, 3], got {frames.dtype} {frames.shape}"
            )
    for key in episode.extras:
        if (
            key in INDEX_KEYS
            or key.startswith("observation.")
            or key.startswith("next.")
            or key == ACTION_KEY
        ):
            raise ValueError(f"episode extras key {key!r} collides with a standard LeRobot feature")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)


def jsonl_text(rows: Iterable[dict[str, Any]]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def append_jsonl(path: Path, row: dict[str, Any]) -> None:
    """Append one line in a single write, flushed to disk (a crash leaves at most a torn last line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(row) + "\n")
        file.flush()
        os.fsync(file.fileno())


def read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"dataset file {path} is not valid JSON: {error}") from error
    if not isinstance(value, dict):
        raise ValueError(f"dataset file {path} must hold a JSON object, got {type(value).__name__}")
    return value


def read_jsonl(path: Path, drop_torn_last_line: bool = False) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file; a torn final line (crash mid-write) is dropped only when asked."""
    if not path.is_file():
        raise FileNotFoundError(f"dataset file {path} does not exist")
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            if drop_torn_last_line and number == len(lines):
                break
            raise ValueError(f"dataset file {path} line {number} is not valid JSON: {error}") from error
    return rows
