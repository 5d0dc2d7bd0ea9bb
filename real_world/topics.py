"""Topic names shared by the robot side and the simulated robot node, for every ROS transport."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RobotTopics:
    """Where each stream lives. Defaults follow common ROS arm drivers (``/joint_states``)."""

    joint_states: str = "/joint_states"
    """sensor_msgs/JointState: arm joints ``joint1..7`` and the two finger joints (half the opening each)."""
    image: str = "/camera/{camera}/image_raw"
    """sensor_msgs/Image (rgb8) of each camera; ``{camera}`` is replaced by the camera name."""
    task_state: str = "/task_state"
    """std_msgs/Float64MultiArray: object and goal state from a tracker (the simulator's ``privileged``)."""
    command: str = "/joint_command"
    """trajectory_msgs/JointTrajectory: joint position targets, one point per control period (or a chunk)."""
    gripper_command: str = "/gripper_command"
    """Distance between the fingers to move to (m): std_msgs/Float64 over ROS 1, a one-entry
    std_msgs/Float64MultiArray over ROS 2."""
    estop: str = "/estop"
    """std_msgs/Bool: True latches the e-stop of the safety layer."""
    teleop_override: str = "/teleop/override"
    """std_msgs/Bool: True while a person overrides the policy."""
    teleop_command: str = "/teleop/command"
    """trajectory_msgs/JointTrajectory: the person's joint targets while overriding."""
    sim_reset: str = "/sim/reset"
    """std_msgs/Int64 (simulated robot only): start a new episode from this seed."""
    sim_status: str = "/sim/status"
    """std_msgs/Float64MultiArray (simulated robot only): ``SIM_STATUS_FIELDS``."""

    def image_topic(self, camera: str) -> str:
        return self.image.format(camera=camera)


IMAGE_TRANSPORTS = ("raw", "compressed")
"""How camera frames travel (``robot.image_transport``): ``raw`` sensor_msgs/Image, or ``compressed``
jpeg/png sensor_msgs/CompressedImage on the image topic + ``/compressed`` (image_transport's names)."""

SIM_STATUS_FIELDS = ("episode", "step", "success", "done", "command_latency_s", "stamp_s")
"""Entries of the simulated robot's status message: episode index (counts resets), control step within
the episode, task success at this step (0/1), episode over (0/1), and the time from the stamp of the
observation the last applied command was computed from to its arrival (s, NaN before the first)."""
