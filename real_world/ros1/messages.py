"""ROS 1 messages: rospy's (genpy) classes, made by ``vla_rl.real_world.ros_messages.RosMessages``.

rospy comes from the system and is imported when a ``Ros1Messages`` is made, so importing this
module needs no ROS.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
from vla_rl.real_world.ros1 import import_rospy
from vla_rl.real_world.ros_messages import RosMessages


class Ros1Messages(RosMessages):
    """Builds ROS 1 messages; ``type`` gives the genpy class of a message type name."""

    def __init__(self) -> None:
        self.rospy = import_rospy()

    def type(self, msgtype: str) -> type:
        """``sensor_msgs/msg/Image`` -> ``sensor_msgs.msg.Image`` (from the system's ROS packages)."""
        package, _, name = msgtype.split("/")
        return getattr(importlib.import_module(f"{package}.msg"), name)

    def make(self, msgtype: str, **fields: Any) -> Any:
        return self.type(msgtype)(**fields)

    def time(self, seconds: float, duration: bool = False) -> Any:
        return (self.rospy.Duration if duration else self.rospy.Time).from_sec(seconds)

    def seconds(self, stamp: Any) -> float:
        return stamp.to_sec()

    def byte_data(self, data: np.ndarray) -> bytes:
        return data.tobytes()  # genpy writes uint8[] from bytes
