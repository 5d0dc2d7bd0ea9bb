"""Batched controllers: normalised policy actions -> joint position targets and gripper command.

Selected by ``EnvConfig.control_mode`` through ``CONTROLLERS``. End-effector modes solve damped
least-squares differential IK over all worlds at once from stacked TCP Jacobians ``[N, 6, 7]``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from vla_rl.robots.panda import RobotDescription
from vla_rl.robots.rotations import axis_angle_to_matrix, orientation_error

# TCP orientation with the gripper pointing straight down (tool z = world -z), fingers along world y.
POINTING_DOWN = np.diag([1.0, -1.0, -1.0])


@dataclass
class ControllerSettings:
    """Scales of the normalised actions and IK parameters."""

    max_joint_step_rad: float = 0.1
    """Joint-position change per control step at action magnitude 1 (``joint_delta``)."""
    max_ee_step_m: float = 0.025
    """TCP translation per control step at action magnitude 1 (end-effector modes)."""
    max_ee_rot_rad: float = 0.15
    """TCP rotation per control step at action magnitude 1 (``ee_delta_pose``)."""
    dls_damping: float = 0.05
    """Damping lambda of the least-squares IK (m / rad): larger is steadier near singularities."""
    nullspace_gain: float = 0.05
    """Fraction of the way back to the home posture per step, in the Jacobian's null space."""
    max_orientation_correction_rad: float = 0.3
    """Cap on the orientation error fed to IK per step, so large errors do not swamp position."""


@dataclass
class RobotState:
    """Batched kinematic state the controllers read (all float64)."""

    arm_qpos: np.ndarray
    """[N, 7] arm joint angles (rad)."""
    tcp_pos: np.ndarray
    """[N, 3] TCP position in the world (m)."""
    tcp_xmat: np.ndarray
    """[N, 3, 3] TCP orientation (columns: tool axes in world coordinates)."""
    tcp_jacobian: np.ndarray
    """[N, 6, 7] TCP Jacobian: rows 0-2 translational, 3-5 rotational, columns arm joints."""


def damped_least_squares(jacobian: np.ndarray, error: np.ndarray, damping: float) -> np.ndarray:
    """dq = J^T (J J^T + damping^2 I)^-1 e for stacked ``jacobian`` [N, m, n] and ``error`` [N, m],
    or [N, m, k] for k right-hand sides at once (dq [N, n, k])."""
    m = jacobian.shape[-2]
    jac_t = np.swapaxes(jacobian, -1, -2)
    jjt = jacobian @ jac_t + (damping**2) * np.eye(m)
    one = error.ndim == jacobian.ndim - 1
    solved = jac_t @ np.linalg.solve(jjt, error[..., None] if one else error)
    return solved[..., 0] if one else solved


def gripper_command(action: np.ndarray, robot: RobotDescription) -> np.ndarray:
    """Map gripper action in [-1, 1] (-1 closed, +1 open) to one finger's target opening in m."""
    return (np.clip(action, -1.0, 1.0) + 1.0) * 0.25 * robot.gripper_max_opening_m


class Controller(ABC):
    """Turns a batch of actions into arm joint targets [N, 7] and gripper targets [N]."""

    action_dim: int

    def __init__(self, robot: RobotDescription, settings: ControllerSettings) -> None:
        self.robot = robot
        self.settings = settings
        self.home = np.asarray(robot.home_arm_qpos, dtype=np.float64)

    @abstractmethod
    def arm_targets(self, action: np.ndarray, state: RobotState) -> np.ndarray:
        """Unclipped arm joint targets [N, 7] for ``action`` [N, action_dim]."""

    def __call__(self, action: np.ndarray, state: RobotState) -> tuple[np.ndarray, np.ndarray]:
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        targets = np.clip(self.arm_targets(action, state), self.robot.arm_lower, self.robot.arm_upper)
        return targets, gripper_command(action[:, -1], self.robot)


class JointDeltaController(Controller):
    """Action [N, 8]: joint deltas scaled by ``max_joint_step_rad`` and the gripper."""

    action_dim = 8

    def arm_targets(self, action: np.ndarray, state: RobotState) -> np.ndarray:
        return state.arm_qpos + action[:, :7] * self.settings.max_joint_step_rad


class _EndEffectorController(Controller):
    def _solve(self, state: RobotState, pos_error: np.ndarray, target_xmat: np.ndarray) -> np.ndarray:
        rot_error = orientation_error(target_xmat, state.tcp_xmat)
        norm = np.linalg.norm(rot_error, axis=-1, keepdims=True)
        cap = self.settings.max_orientation_correction_rad
        rot_error = rot_error * np.minimum(1.0, cap / np.maximum(norm, 1e-12))
        error = np.concatenate([pos_error, rot_error], axis=-1)
        jac = state.tcp_jacobian
        # One batched solve for both right-hand sides: the task error and the null-space pull.
        pull = self.settings.nullspace_gain * (self.home - state.arm_qpos)
        rhs = np.stack([error, (jac @ pull[..., None])[..., 0]], axis=-1)
        solved = damped_least_squares(jac, rhs, self.settings.dls_damping)
        # dq = J^+ e + (I - J^+ J) pull, with the damped pseudo-inverse J^+ = J^T (J J^T + l^2 I)^-1.
        dq = solved[..., 0] + pull - solved[..., 1]
        return state.arm_qpos + dq


class EEDeltaPosController(_EndEffectorController):
    """Action [N, 4]: TCP xyz delta scaled by ``max_ee_step_m``, orientation held pointing down."""

    action_dim = 4

    def arm_targets(self, action: np.ndarray, state: RobotState) -> np.ndarray:
        target = np.broadcast_to(POINTING_DOWN, state.tcp_xmat.shape)
        return self._solve(state, action[:, :3] * self.settings.max_ee_step_m, target)


class EEDeltaPoseController(_EndEffectorController):
    """Action [N, 7]: TCP xyz delta and world-frame axis-angle delta (``max_ee_rot_rad``), gripper."""

    action_dim = 7

    def arm_targets(self, action: np.ndarray, state: RobotState) -> np.ndarray:
        rotation = axis_angle_to_matrix(action[:, 3:6] * self.settings.max_ee_rot_rad)
        return self._solve(state, action[:, :3] * self.settings.max_ee_step_m, rotation @ state.tcp_xmat)


CONTROLLERS: dict[str, type[Controller]] = {
    "joint_delta": JointDeltaController,
    "ee_delta_pos": EEDeltaPosController,
    "ee_delta_pose": EEDeltaPoseController,
}


def make_controller(
    control_mode: str, robot: RobotDescription, settings: ControllerSettings | None = None
) -> Controller:
    if control_mode not in CONTROLLERS:
        raise ValueError(f"unknown control_mode {control_mode!r}; allowed: {', '.join(sorted(CONTROLLERS))}")
    return CONTROLLERS[control_mode](robot, settings or ControllerSettings())
