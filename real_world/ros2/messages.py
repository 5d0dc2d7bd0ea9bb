"""ROS 2 messages: rosbags' objects, made by ``vla_rl.real_world.ros_messages.RosMessages``."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from vla_rl.real_world.ros2.types import message
from vla_rl.real_world.ros_messages import RosMessages

TIME = "builtin_interfaces/msg/Time"
DURATION = "builtin_interfaces/msg/Duration"


def time_msg(stamp_s: float, msgtype: str = TIME) -> Any:
    """builtin_interfaces Time (or Duration) of a time in seconds."""
    sec = math.floor(stamp_s)
    nanosec = min(round((stamp_s - sec) * 1e9), 999_999_999)
    return message(msgtype, sec=sec, nanosec=nanosec)


def stamp_seconds(stamp: Any) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


class Ros2Messages(RosMessages):
    """Builds ROS 2 messages (every field given: rosbags' dataclasses have no defaults)."""

    def make(self, msgtype: str, **fields: Any) -> Any:
        return message(msgtype, **fields)

    def time(self, seconds: float, duration: bool = False) -> Any:
        return time_msg(seconds, DURATION if duration else TIME)

    def seconds(self, stamp: Any) -> float:
        return stamp_seconds(stamp)

    def byte_data(self, data: np.ndarray) -> np.ndarray:
        return data


ROS2 = Ros2Messages()
