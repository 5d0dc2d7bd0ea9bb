"""Batched controllers in torch: the twins of ``vla_rl.robots.controllers`` for device-resident rollouts.

Same maths, same ``ControllerSettings``, same action layouts; inputs and outputs are tensors on any
device (CPU or CUDA) and stay there: no ``.item()``, no ``.cpu()``, no data-dependent Python branches.
Results have the dtype of the robot state (float64 reproduces the numpy controllers to rounding;
float32 works too). Selected by control mode through ``TORCH_CONTROLLERS`` / ``make_torch_controller``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from vla_rl.robots.controllers import POINTING_DOWN, ControllerSettings, RobotState
from vla_rl.robots.panda import RobotDescription
from vla_rl.robots.torch_rotations import axis_angle_to_matrix, euclidean_norm, orientation_error

_MIN_ERROR_NORM = 1e-12
"""Smallest orientation-error norm (rad) divided by when capping the error."""


@dataclass
class TorchRobotState:
    """Batched kinematic state the torch controllers read: tensors on one device, one float dtype."""

    arm_qpos: torch.Tensor
    """[N, 7] arm joint angles (rad)."""
    tcp_pos: torch.Tensor
    """[N, 3] TCP position in the world (m)."""
    tcp_xmat: torch.Tensor
    """[N, 3, 3] TCP orientation (columns: tool axes in world coordinates)."""
    tcp_jacobian: torch.Tensor
    """[N, 6, 7] TCP Jacobian: rows 0-2 translational, 3-5 rotational, columns arm joints."""

    @classmethod
    def from_numpy(
        cls, state: RobotState, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float64
    ) -> TorchRobotState:
        """Copy a numpy ``RobotState`` onto ``device`` as ``dtype`` tensors."""

        def convert(array: np.ndarray) -> torch.Tensor:
            return torch.as_tensor(np.ascontiguousarray(array), dtype=dtype, device=device)

        return cls(
            arm_qpos=convert(state.arm_qpos),
            tcp_pos=convert(state.tcp_pos),
            tcp_xmat=convert(state.tcp_xmat),
            tcp_jacobian=convert(state.tcp_jacobian),
        )


@lru_cache(maxsize=32)
def pointing_down(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """``POINTING_DOWN`` (TCP z along world -z, fingers along world y) as a [3, 3] tensor, cached per
    device and dtype. Shared: do not modify it in place."""
    return torch.as_tensor(POINTING_DOWN, dtype=dtype, device=device)


def damped_least_squares(jacobian: torch.Tensor, error: torch.Tensor, damping: float) -> torch.Tensor:
    """dq = J^T (J J^T + damping^2 I)^-1 e for stacked ``jacobian`` [N, m, n] and ``error`` [N, m],
    or [N, m, k] for k right-hand sides at once (dq [N, n, k])."""
    m = jacobian.shape[-2]
    jac_t = jacobian.transpose(-1, -2)
    eye = torch.eye(m, device=jacobian.device, dtype=jacobian.dtype)
    jjt = jacobian @ jac_t + (damping**2) * eye
    one = error.ndim == jacobian.ndim - 1
    # torch.linalg.solve's LU solve without its error check: the check reads the solver's status
    # back to the host (a sync on CUDA), and J J^T + damping^2 I is positive definite for damping > 0.
    solution, _ = torch.linalg.solve_ex(jjt, error[..., None] if one else error, check_errors=False)
    solved = jac_t @ solution
    return solved[..., 0] if one else solved


def gripper_command(action: torch.Tensor, robot: RobotDescription) -> torch.Tensor:
    """Map gripper action in [-1, 1] (-1 closed, +1 open) to one finger's target opening in m."""
    return (torch.clamp(action, -1.0, 1.0) + 1.0) * 0.25 * robot.gripper_max_opening_m


def cap_norm(vector: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Scale each row of ``vector`` [N, d] down so its Euclidean norm is at most ``max_norm``."""
    norm = euclidean_norm(vector, keepdim=True)
    return vector * torch.clamp(max_norm / torch.clamp(norm, min=_MIN_ERROR_NORM), max=1.0)


class TorchController(ABC):
    """Turns a batch of actions into arm joint targets [N, 7] and gripper targets [N] (tensors)."""

    action_dim: int

    def __init__(self, robot: RobotDescription, settings: ControllerSettings) -> None:
        self.robot = robot
        self.settings = settings
        self._robot_constants: dict[tuple[torch.device, torch.dtype], tuple[torch.Tensor, ...]] = {}

    def robot_constants(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Home posture, lower and upper joint limits ([7] each, rad) on ``like``'s device and dtype,
        built once per device and dtype."""
        key = (like.device, like.dtype)
        if key not in self._robot_constants:
            values = (
                self.robot.home_arm_qpos,
                self.robot.arm_joint_lower_rad,
                self.robot.arm_joint_upper_rad,
            )
            self._robot_constants[key] = tuple(
                torch.tensor(v, dtype=like.dtype, device=like.device) for v in values
            )
        home, lower, upper = self._robot_constants[key]
        return home, lower, upper

    @abstractmethod
    def arm_targets(self, action: torch.Tensor, state: TorchRobotState) -> torch.Tensor:
        """Unclipped arm joint targets [N, 7] for clipped ``action`` [N, action_dim]."""

    def __call__(self, action: torch.Tensor, state: TorchRobotState) -> tuple[torch.Tensor, torch.Tensor]:
        """``(arm_targets [N, 7] rad, finger_target_m [N])`` for ``action`` [N, action_dim] in [-1, 1]
        (values outside are clipped). The action is cast to the state's device and dtype."""
        like = state.arm_qpos
        action = torch.clamp(torch.as_tensor(action).to(device=like.device, dtype=like.dtype), -1.0, 1.0)
        _, lower, upper = self.robot_constants(like)
        targets = torch.clamp(self.arm_targets(action, state), lower, upper)
        return targets, gripper_command(action[:, -1], self.robot)


class JointDeltaController(TorchController):
    """Action [N, 8]: joint deltas scaled by ``max_joint_step_rad`` and the gripper."""

    action_dim = 8

    def arm_targets(self, action: torch.Tensor, state: TorchRobotState) -> torch.Tensor:
        return state.arm_qpos + action[:, :7] * self.settings.max_joint_step_rad


class _EndEffectorController(TorchController):
    """Damped least-squares differential IK towards a TCP position step and target orientation."""

    def _solve(
        self, state: TorchRobotState, pos_error_m: torch.Tensor, target_xmat: torch.Tensor
    ) -> torch.Tensor:
        """Arm joint targets [N, 7] moving the TCP by ``pos_error_m`` [N, 3] and towards
        ``target_xmat`` [N, 3, 3], with a pull towards home in the Jacobian's null space."""
        rot_error_rad = cap_norm(
            orientation_error(target_xmat, state.tcp_xmat), self.settings.max_orientation_correction_rad
        )
        error = torch.cat([pos_error_m, rot_error_rad], dim=-1)
        jac = state.tcp_jacobian
        home, _, _ = self.robot_constants(state.arm_qpos)
        # One batched solve for both right-hand sides: the task error and the null-space pull.
        pull = self.settings.nullspace_gain * (home - state.arm_qpos)
        rhs = torch.stack([error, (jac @ pull[..., None])[..., 0]], dim=-1)
        solved = damped_least_squares(jac, rhs, self.settings.dls_damping)
        # dq = J^+ e + (I - J^+ J) pull, with the damped pseudo-inverse J^+ = J^T (J J^T + l^2 I)^-1.
        dq = solved[..., 0] + pull - solved[..., 1]
        return state.arm_qpos + dq


class EEDeltaPosController(_EndEffectorController):
    """Action [N, 4]: TCP xyz delta scaled by ``max_ee_step_m``, orientation held pointing down."""

    action_dim = 4

    def arm_targets(self, action: torch.Tensor, state: TorchRobotState) -> torch.Tensor:
        target = pointing_down(state.tcp_xmat.device, state.tcp_xmat.dtype).expand_as(state.tcp_xmat)
        return self._solve(state, action[:, :3] * self.settings.max_ee_step_m, target)


class EEDeltaPoseController(_EndEffectorController):
    """Action [N, 7]: TCP xyz delta and world-frame axis-angle delta (``max_ee_rot_rad``), gripper."""

    action_dim = 7

    def arm_targets(self, action: torch.Tensor, state: TorchRobotState) -> torch.Tensor:
        rotation = axis_angle_to_matrix(action[:, 3:6] * self.settings.max_ee_rot_rad)
        return self._solve(state, action[:, :3] * self.settings.max_ee_step_m, rotation @ state.tcp_xmat)


TORCH_CONTROLLERS: dict[str, type[TorchController]] = {
    "joint_delta": JointDeltaController,
    "ee_delta_pos": EEDeltaPosController,
    "ee_delta_pose": EEDeltaPoseController,
}
"""Control mode -> torch controller class (the same names as ``controllers.CONTROLLERS``)."""


def make_torch_controller(
    control_mode: str, robot: RobotDescription, settings: ControllerSettings | None = None
) -> TorchController:
    """The torch controller of ``control_mode`` for ``robot`` (default ``ControllerSettings()``)."""
    if control_mode not in TORCH_CONTROLLERS:
        raise ValueError(
            f"unknown control_mode {control_mode!r}; allowed: {', '.join(sorted(TORCH_CONTROLLERS))}"
        )
    return TORCH_CONTROLLERS[control_mode](robot, settings or ControllerSettings())
