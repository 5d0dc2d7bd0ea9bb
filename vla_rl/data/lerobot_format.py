"""LeRobot v2.1 datasets: one import point for the writer, the reader and the video settings."""

from __future__ import annotations

from vla_rl.data.lerobot_layout import CODEBASE_VERSION, DATA_PATH, VIDEO_PATH
from vla_rl.data.lerobot_reader import LeRobotDataset
from vla_rl.data.lerobot_writer import LeRobotWriter, write_dataset
from vla_rl.data.video import LOSSLESS_VIDEO, VideoSettings

__all__ = [
    "CODEBASE_VERSION",
    "DATA_PATH",
    "LOSSLESS_VIDEO",
    "VIDEO_PATH",
    "LeRobotDataset",
    "LeRobotWriter",
    "VideoSettings",
    "write_dataset",
]
