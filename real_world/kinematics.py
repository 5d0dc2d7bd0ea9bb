"""Forward kinematics and Jacobians of the arm from its MJCF, for the robot side of deployment.

A real arm reports joint angles; the policy was trained on the simulator's ``proprio`` vector,
which also holds the TCP pose, and the end-effector controllers need the TCP Jacobian. MuJoCo
computes both from the same model the simulator uses (``mj_kinematics`` and ``mj_jacSite``, no
physics), so the deployment sees the numbers the policy saw in training.
"""

from __future__ import annotations

import mujoco
import numpy as np
from vla_rl.robots.controllers import RobotState
from vla_rl.robots.panda import PANDA, RobotDescription


class ArmKinematics:
    """FK and Jacobian of the TCP site for one arm configuration at a time (or a batch, looped)."""

    def __init__(self, robot: RobotDescription = PANDA) -> None:
        self.robot = robot
        self.model = mujoco.MjModel.from_xml_path(str(robot.xml_path))
        self.data = mujoco.MjData(self.model)
        self._qadr = np.array([self.model.joint(n).qposadr[0] for n in robot.arm_joint_names])
        self._vadr = np.array([self.model.joint(n).dofadr[0] for n in robot.arm_joint_names])
        self._site = self.model.site(robot.tcp_site_name).id
        self._jacp = np.zeros((3, self.model.nv))
        self._jacr = np.zeros((3, self.model.nv))

    def _pose(self, arm_qpos_rad: np.ndarray) -> None:
        self.data.qpos[self._qadr] = arm_qpos_rad
        mujoco.mj_kinematics(self.model, self.data)

    def tcp_pose(self, arm_qpos_rad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TCP position [3] (m) and orientation matrix [3, 3] at joint angles ``arm_qpos_rad`` [7]."""
        self._pose(np.asarray(arm_qpos_rad, dtype=np.float64))
        return self.data.site_xpos[self._site].copy(), self.data.site_xmat[self._site].reshape(3, 3).copy()

    def robot_state(self, arm_qpos_rad: np.ndarray) -> RobotState:
        """What the controllers read, for one configuration (batch of 1)."""
        q = np.asarray(arm_qpos_rad, dtype=np.float64)
        self._pose(q)
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_jacSite(self.model, self.data, self._jacp, self._jacr, self._site)
        jacobian = np.concatenate([self._jacp, self._jacr])[:, self._vadr]
        return RobotState(
            arm_qpos=q[None],
            tcp_pos=self.data.site_xpos[self._site][None].copy(),
            tcp_xmat=self.data.site_xmat[self._site].reshape(1, 3, 3).copy(),
            tcp_jacobian=jacobian[None],
        )
