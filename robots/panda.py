"""Description of the Panda-like arm: where its MJCF lives and the names the environment needs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

ASSETS_DIR = Path(__file__).resolve().parent / "assets"


@dataclass(frozen=True)
class RobotDescription:
    """Names and constants of one robot model, so controllers and scenes avoid hard-coding them."""

    xml_path: Path
    """MJCF file of the robot alone (no table, lights or objects)."""
    arm_joint_names: tuple[str, ...]
    """Hinge joints of the arm, base to wrist."""
    gripper_joint_names: tuple[str, ...]
    """Slide joints of the fingers (each 0 closed .. ``gripper_max_opening_m / 2`` open)."""
    arm_actuator_names: tuple[str, ...]
    """Position actuators of the arm joints, in ``arm_joint_names`` order."""
    gripper_actuator_name: str
    """Position actuator of the coupled fingers; its control is the opening of one finger in m."""
    tcp_site_name: str
    """Site between the fingertips (tool centre point)."""
    wrist_camera_name: str
    """Camera mounted on the hand."""
    home_arm_qpos: tuple[float, ...]
    """Arm joint angles (rad) with the gripper pointing down above the table."""
    arm_joint_lower_rad: tuple[float, ...]
    """Lower arm joint limits (rad)."""
    arm_joint_upper_rad: tuple[float, ...]
    """Upper arm joint limits (rad)."""
    gripper_max_opening_m: float
    """Distance between the fingers when fully open."""

    @property
    def num_arm_joints(self) -> int:
        return len(self.arm_joint_names)

    @property
    def arm_lower(self) -> np.ndarray:
        return np.asarray(self.arm_joint_lower_rad, dtype=np.float64)

    @property
    def arm_upper(self) -> np.ndarray:
        return np.asarray(self.arm_joint_upper_rad, dtype=np.float64)


PANDA = RobotDescription(
    xml_path=ASSETS_DIR / "panda.xml",
    arm_joint_names=tuple(f"joint{i}" for i in range(1, 8)),
    gripper_joint_names=("finger_joint1", "finger_joint2"),
    arm_actuator_names=tuple(f"actuator{i}" for i in range(1, 8)),
    gripper_actuator_name="gripper",
    tcp_site_name="tcp",
    wrist_camera_name="wrist",
    home_arm_qpos=(0.0, 0.0, 0.0, -2.4, 0.0, 2.4, 0.785398),
    arm_joint_lower_rad=(-2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973),
    arm_joint_upper_rad=(2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973),
    gripper_max_opening_m=0.08,
)
