"""A scripted expert for gym-hil's pick-cube, from the privileged cube position.

It acts in the batched env's unit actions ([-1, 1]^4, which ``GymnasiumBatchedEnv`` rescales to
gym-hil's bounds): an end-effector delta of ``unit * 2.5 cm`` per axis and a gripper increment
(``+1`` closes the gripper in one step, ``-1`` opens it, ``0`` holds). Per world it hovers above
the cube, descends until the pinch point is at the cube, closes, waits for the fingers, then lifts.
"""

from __future__ import annotations

import torch

EE_STEP_M = 0.025
"""gym-hil's end-effector step per unit of action (``DEFAULT_EE_STEP_SIZE``)."""
GRIPPER_INDEX = 14
"""Index in ``proprio`` of the gripper command (0 open .. 255 closed)."""
PINCH_SLICE = slice(15, 18)
"""Indices in ``proprio`` of the pinch point's position (m)."""
HOVER_M = 0.06
"""Height above the cube at which the hand lines up before descending."""
ALIGNED_XY_M = 0.008
"""Horizontal error below which the hand descends."""
AT_CUBE_M = 0.012
"""Distance from the pinch point to the cube's centre at which the gripper closes."""
CLOSE_WAIT_STEPS = 4
"""Steps the gripper closes before the lift starts (0.4 s)."""
LIFT_M = 0.2
"""Lift target above the cube's start height (success is 0.1 m)."""


class PickCubeExpert:
    """The ``Actor`` of ``vla_rl.data.collect``: ``act(obs) -> (executed, clean)`` for every world."""

    def __init__(self, num_envs: int, gain: float = 1.0) -> None:
        self.gain = gain
        self._closed_steps = torch.zeros(num_envs, dtype=torch.long)
        self._start_z = torch.zeros(num_envs)

    def act(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        proprio = obs["proprio"].float()
        cube = obs["privileged"].float()
        pinch = proprio[:, PINCH_SLICE]
        closed = proprio[:, GRIPPER_INDEX] > 127.5
        # A world whose gripper is open is (again) before its grasp: remember the cube's height.
        self._start_z = torch.where(closed, self._start_z, cube[:, 2])
        self._closed_steps = torch.where(closed, self._closed_steps + 1, torch.zeros_like(self._closed_steps))

        error = cube - pinch
        aligned = error[:, :2].norm(dim=1) < ALIGNED_XY_M
        at_cube = error.norm(dim=1) < AT_CUBE_M
        hover = cube.clone()
        hover[:, 2] += HOVER_M
        target = torch.where(aligned.unsqueeze(1), cube, hover)
        lift = cube.clone()
        lift[:, 2] = self._start_z + LIFT_M
        lifting = closed & (self._closed_steps >= CLOSE_WAIT_STEPS)
        target = torch.where(closed.unsqueeze(1), cube, target)
        target = torch.where(lifting.unsqueeze(1), lift, target)

        move = ((target - pinch) * self.gain / EE_STEP_M).clamp(-1.0, 1.0)
        move = torch.where((closed & ~lifting).unsqueeze(1), torch.zeros_like(move), move)
        gripper = torch.where(closed | at_cube, 1.0, -1.0).unsqueeze(1)
        action = torch.cat([move, gripper], dim=1)
        return action, action
