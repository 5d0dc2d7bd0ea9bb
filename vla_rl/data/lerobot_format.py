"""Which LeRobot dataset version is read and written: readers dispatch on a dataset's
``meta/info.json`` ``codebase_version``, writers are chosen by name (``v2.1`` or ``v3.0``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_layout import INFO_PATH, read_json
from vla_rl.registry import resolve

DEFAULT_CODEBASE_VERSION = "v3.0"
"""The version ``vla-rl collect``, deployment recording, the MetaWorld recorder and ``dataset_writer``
write unless told (LeRobot 0.4's; ``v2.1`` stays writable and every reader takes both)."""

DEFAULT_FINALIZE_EVERY_EPISODES = 50
"""Episodes between two finalises of a v3.0 writer unless told: what a crash can lose, against one more
data and video file per camera (and a rewrite of the meta files) per that many episodes."""

DATASET_WRITERS: dict[str, str] = {
    "v2.1": "vla_rl.data.lerobot_writer:LeRobotWriter",
    "v3.0": "vla_rl.data.lerobot_v3_writer:LeRobotV3Writer",
}
"""Codebase version -> writer class (same constructor and ``add_episode`` / ``close`` interface)."""

DATASET_READERS: dict[str, str] = {
    "v2": "vla_rl.data.lerobot_reader:LeRobotDataset",
    "v3": "vla_rl.data.lerobot_v3_reader:LeRobotV3Dataset",
}
"""Major version of ``codebase_version`` -> reader class (the same episode interface)."""


def dataset_version(root: str | Path) -> str:
    """``codebase_version`` of the dataset at ``root`` (``v2.1`` when info.json does not say)."""
    return str(read_json(Path(root) / INFO_PATH).get("codebase_version", "v2.1"))


def open_dataset(root: str | Path) -> Any:
    """The reader of the dataset at ``root`` for its version (``LeRobotDataset`` or ``LeRobotV3Dataset``)."""
    version = dataset_version(root)
    major = version.split(".")[0]
    if major not in DATASET_READERS:
        raise ValueError(
            f"{Path(root) / INFO_PATH}: codebase_version {version!r} is not supported "
            f"(readable: {', '.join(f'{m}.x' for m in DATASET_READERS)})"
        )
    return resolve(DATASET_READERS, major, "LeRobot dataset reader")(root)


def dataset_writer(
    root: str | Path, fps: float, codebase_version: str = DEFAULT_CODEBASE_VERSION, **kwargs: Any
) -> Any:
    """A writer of ``codebase_version`` at ``root`` (``kwargs`` as the writers take them: ``robot_type``,
    ``video``, ``feature_names``, ``append``, ``finalize_every_episodes``, ``chunks_size``). Appending
    (``append=True``) to an existing dataset of another version fails: one dataset keeps one version."""
    if codebase_version not in DATASET_WRITERS:
        raise ValueError(
            f"unknown LeRobot dataset version {codebase_version!r}; writable: {', '.join(DATASET_WRITERS)}"
        )
    if kwargs.get("append") and (Path(root) / INFO_PATH).is_file():
        existing = dataset_version(root)
        if existing != codebase_version:
            raise ValueError(
                f"{root} holds a {existing} dataset: append to it as {existing}, not {codebase_version}"
            )
    return resolve(DATASET_WRITERS, codebase_version, "LeRobot dataset writer")(root, fps, **kwargs)


def write_dataset(
    root: str | Path,
    episodes: Sequence[Episode],
    fps: float,
    codebase_version: str = DEFAULT_CODEBASE_VERSION,
    **kwargs: Any,
) -> Path:
    """Write ``episodes`` as a new LeRobot dataset of ``codebase_version`` at ``root`` (``kwargs`` as
    ``dataset_writer`` takes them: ``robot_type``, ``video``, ``feature_names``); returns ``root``."""
    with dataset_writer(root, fps, codebase_version, **kwargs) as writer:
        for episode in episodes:
            writer.add_episode(episode)
    return Path(root)
