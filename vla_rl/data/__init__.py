"""Demonstrations: the episode format, LeRobot-format datasets, scripted collection.

The dataset classes are imported on first use, so ``from vla_rl.data.episode import Episode``
does not pull in pyarrow or the simulator.
"""

from __future__ import annotations

import importlib
from typing import Any

from vla_rl.data.episode import Episode

_LAZY_EXPORTS = {
    "LeRobotDataset": "vla_rl.data.lerobot_reader",
    "LeRobotWriter": "vla_rl.data.lerobot_writer",
    "write_dataset": "vla_rl.data.lerobot_format",
    "LeRobotV3Dataset": "vla_rl.data.lerobot_v3_reader",
    "LeRobotV3Writer": "vla_rl.data.lerobot_v3_writer",
    "open_dataset": "vla_rl.data.lerobot_format",
    "dataset_writer": "vla_rl.data.lerobot_format",
    "VideoSettings": "vla_rl.data.video",
    "LOSSLESS_VIDEO": "vla_rl.data.video",
    "CollectConfig": "vla_rl.data.config",
    "collect_demonstrations": "vla_rl.data.collect",
}

__all__ = ["Episode", *_LAZY_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _LAZY_EXPORTS:
        return getattr(importlib.import_module(_LAZY_EXPORTS[name]), name)
    raise AttributeError(f"module 'vla_rl.data' has no attribute {name!r}")
