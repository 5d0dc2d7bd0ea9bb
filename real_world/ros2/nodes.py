"""A ROS 2 node of either backend: cyclonedds directly (``dds``) or ROS 2's own ``rclpy``."""

from __future__ import annotations

from vla_rl.real_world.ros2.dds import DdsNode, Node
from vla_rl.real_world.ros2.rclpy_node import RclpyNode


def make_node(backend: str = "dds", domain_id: int = 0, config: str | None = None) -> Node:
    """A ``DdsNode`` or, for ``backend='rclpy'``, an ``RclpyNode`` (``config`` is cyclonedds' only)."""
    if backend == "rclpy":
        return RclpyNode("vla_rl_deploy", domain_id)
    if backend != "dds":
        raise ValueError(f"unknown ROS 2 backend {backend!r}; expected 'dds' or 'rclpy'")
    return DdsNode(domain_id, config)
