"""Action labels for commands a person sent: the normalised action, in a policy's own units, that
explains a joint target sent from the measured joints (the inverse of the simulator's controllers),
so that takeover steps can be recorded and learned from as if the policy had chosen them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand
from vla_rl.robots.controllers import ControllerSettings, gripper_command
from vla_rl.robots.panda import PANDA, RobotDescription
from vla_rl.robots.rotations import orientation_error


def gripper_opening(action: float, robot: RobotDescription = PANDA) -> float:
    """Finger distance (m) a gripper action in [-1, 1] commands: ``gripper_command`` gives the
    opening of one finger (the simulator's actuator), a ``JointCommand`` the distance between two."""
    return 2.0 * float(gripper_command(np.asarray(action, np.float64), robot))


def gripper_action(opening_m: float, robot: RobotDescription = PANDA) -> float:
    """Inverse of ``gripper_opening`` (so of ``gripper_command``), clipped to [-1, 1]."""
    return float(np.clip(2.0 * opening_m / robot.gripper_max_opening_m - 1.0, -1.0, 1.0))


ArmLabel = Callable[[np.ndarray, np.ndarray, ArmKinematics, ControllerSettings], np.ndarray]
"""(commanded joints [7], measured joints [7], kinematics, settings) -> unclipped arm action."""


def _joint_delta_label(
    q_cmd: np.ndarray, q: np.ndarray, _: ArmKinematics, s: ControllerSettings
) -> np.ndarray:
    return (q_cmd - q) / s.max_joint_step_rad


def _ee_delta_pos_label(
    q_cmd: np.ndarray, q: np.ndarray, kin: ArmKinematics, s: ControllerSettings
) -> np.ndarray:
    return (kin.tcp_pose(q_cmd)[0] - kin.tcp_pose(q)[0]) / s.max_ee_step_m


def _ee_delta_pose_label(
    q_cmd: np.ndarray, q: np.ndarray, kin: ArmKinematics, s: ControllerSettings
) -> np.ndarray:
    pos_cmd, rot_cmd = kin.tcp_pose(q_cmd)
    pos, rot = kin.tcp_pose(q)
    # World-frame rotation vector of R_cmd R^T: the controller's target is axis_angle(a) @ R.
    rotvec = orientation_error(rot_cmd[None], rot[None])[0]
    return np.concatenate([(pos_cmd - pos) / s.max_ee_step_m, rotvec / s.max_ee_rot_rad])


ARM_LABELS: dict[str, ArmLabel] = {
    "joint_delta": _joint_delta_label,
    "ee_delta_pos": _ee_delta_pos_label,
    "ee_delta_pose": _ee_delta_pose_label,
}


def command_to_action(
    command: JointCommand,
    arm_qpos_rad: np.ndarray,
    control_mode: str,
    kinematics: ArmKinematics,
    settings: ControllerSettings,
    robot: RobotDescription = PANDA,
) -> np.ndarray:
    """The normalised action (float32, clipped to [-1, 1]) that best explains ``command`` sent
    from the measured joints ``arm_qpos_rad``, so intervention frames get a label in the policy's
    units. Exact for ``joint_delta`` and the gripper; the end-effector modes read the TCP motion of
    the command, which damped IK only approximately produces from the action (see the tests)."""
    if control_mode not in ARM_LABELS:
        raise ValueError(f"unknown control_mode {control_mode!r}; allowed: {', '.join(sorted(ARM_LABELS))}")
    q_cmd = np.asarray(command.arm_qpos_rad, np.float64)
    q = np.asarray(arm_qpos_rad, np.float64)
    arm = ARM_LABELS[control_mode](q_cmd, q, kinematics, settings)
    action = np.append(arm, gripper_action(command.gripper_opening_m, robot))
    return np.clip(action, -1.0, 1.0).astype(np.float32)
