"""Scripted ``ee_delta_pos`` policies that solve the tasks from privileged observations.

They are stateless (each action depends only on the current observation), which keeps them
correct across autoresets. Used by tests and to record demonstrations.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from vla_rl.robots.controllers import ControllerSettings
from vla_rl.sims.mujoco.observations import PROPRIO_FIELDS, split_fields
from vla_rl.sims.tasks.base import CUBE_HALF_SIZE_M, GRASP_OPENING_RANGE_M, Task
from vla_rl.sims.tasks.lift import LiftTask
from vla_rl.sims.tasks.pick_place import PickPlaceTask
from vla_rl.sims.tasks.push import PushTask
from vla_rl.sims.tasks.reach import ReachTask

OPEN, CLOSED = 1.0, -1.0
HOVER_HEIGHT_M = 0.09
CARRY_HEIGHT_M = 0.12
XY_ALIGNED_M = 0.008
GRASP_REACHED_M = 0.012
PUSH_BEHIND_M = 0.055
"""Where the TCP lines up behind the cube (from its centre, away from the goal) before pushing."""
PUSH_HOVER_HEIGHT_M = 0.07
PUSH_DONE_M = 0.015
"""Cube-to-goal distance at which the push stops and the TCP rises clear (success is < 0.05 m)."""


def _move(tcp: np.ndarray, target: np.ndarray, gripper: np.ndarray, max_step_m: float) -> np.ndarray:
    delta = np.clip((target - tcp) / max_step_m, -1.0, 1.0)
    return np.concatenate([delta, gripper[:, None]], axis=1)


def _pick_targets(
    tcp: np.ndarray, cube: np.ndarray, opening: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Approach-and-grasp phase shared by lift and pick_place: (tcp target, gripper, holding)."""
    xy_error = np.linalg.norm(tcp[:, :2] - cube[:, :2], axis=1)
    distance = np.linalg.norm(tcp - cube, axis=1)
    holding = (distance < 0.02) & (opening < GRASP_OPENING_RANGE_M[1])
    at_cube = distance < GRASP_REACHED_M
    above = np.concatenate([cube[:, :2], cube[:, 2:] + HOVER_HEIGHT_M], axis=1)
    # Far in xy and low: rise first, so the fingers do not sweep through objects.
    rise = (xy_error > 2 * XY_ALIGNED_M) & (tcp[:, 2] < cube[:, 2] + HOVER_HEIGHT_M - 0.03)
    target = np.where((xy_error > XY_ALIGNED_M)[:, None], above, cube)
    target = np.where(rise[:, None], np.concatenate([tcp[:, :2], above[:, 2:]], axis=1), target)
    gripper = np.where(at_cube | holding, CLOSED, OPEN)
    return target, gripper, holding


def _read(obs: dict, task: type[Task]) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The privileged fields of ``task``, the TCP position [N, 3] and the finger opening [N] (m)."""
    proprio = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)
    privileged = split_fields(obs["privileged"].numpy(), task.privileged_fields)
    return privileged, proprio["tcp_pos"], proprio["gripper_opening_m"][:, 0]


def reach_policy(obs: dict, max_step_m: float) -> np.ndarray:
    p, tcp, _ = _read(obs, ReachTask)
    return _move(tcp, p["target_pos"], np.full(len(tcp), OPEN), max_step_m)


def push_policy(obs: dict, max_step_m: float) -> np.ndarray:
    p, tcp, _ = _read(obs, PushTask)
    cube, goal = p["cube_pos"], p["target_xy"]
    n = len(tcp)
    to_goal = goal - cube[:, :2]
    distance = np.linalg.norm(to_goal, axis=1)
    direction = to_goal / np.maximum(distance, 1e-9)[:, None]
    rel = tcp[:, :2] - cube[:, :2]
    behind_m = -np.sum(rel * direction, axis=1)
    lateral = np.abs(rel[:, 0] * direction[:, 1] - rel[:, 1] * direction[:, 0])
    push_height = np.full((n, 1), CUBE_HALF_SIZE_M)
    behind = cube[:, :2] - direction * PUSH_BEHIND_M
    pushing = (behind_m > 0.03) & (lateral < 0.02) & (tcp[:, 2] < 0.045)
    # Aim the TCP where it will be once the cube sits on the goal, keeping today's contact
    # distance: the TCP then moves by exactly the cube's remaining error and stops there,
    # instead of pushing through (overshooting) and oscillating about the goal.
    push_target = np.concatenate([goal - direction * behind_m[:, None], push_height], axis=1)
    near_behind = np.linalg.norm(tcp[:, :2] - behind, axis=1) < 0.012
    descend_target = np.concatenate([behind, push_height], axis=1)
    hover = np.concatenate([behind, np.full((n, 1), PUSH_HOVER_HEIGHT_M)], axis=1)
    rise = np.concatenate([tcp[:, :2], np.full((n, 1), PUSH_HOVER_HEIGHT_M)], axis=1)
    target = np.where(
        near_behind[:, None], descend_target, np.where((tcp[:, 2] < 0.05)[:, None], rise, hover)
    )
    target = np.where(pushing[:, None], push_target, target)
    target = np.where((distance < PUSH_DONE_M)[:, None], rise, target)
    return _move(tcp, target, np.full(n, CLOSED), max_step_m)


def lift_policy(obs: dict, max_step_m: float) -> np.ndarray:
    p, tcp, opening = _read(obs, LiftTask)
    target, gripper, holding = _pick_targets(tcp, p["cube_pos"], opening)
    lift = np.concatenate([tcp[:, :2], np.full((len(tcp), 1), CARRY_HEIGHT_M)], axis=1)
    target = np.where(holding[:, None], lift, target)
    return _move(tcp, target, gripper, max_step_m)


def pick_place_policy(obs: dict, max_step_m: float) -> np.ndarray:
    p, tcp, opening = _read(obs, PickPlaceTask)
    n = len(tcp)
    cubes = p["cubes_pos"].reshape(n, -1, 3)
    pads = p["pads_xy"].reshape(n, -1, 2)
    rows = np.arange(n)
    cube = cubes[rows, p["cube_onehot"].argmax(axis=1)]
    pad = pads[rows, p["pad_onehot"].argmax(axis=1)]
    target, gripper, holding = _pick_targets(tcp, cube, opening)
    to_pad = np.linalg.norm(cube[:, :2] - pad, axis=1)
    carry_height = np.full((n, 1), CARRY_HEIGHT_M)
    over_pad = to_pad < 2 * XY_ALIGNED_M
    # Aim the cube (not the TCP) at the pad: the cube may sit off-centre between the fingers.
    pad_for_tcp = pad + tcp[:, :2] - cube[:, :2]
    carry = np.where(
        (cube[:, 2] < CARRY_HEIGHT_M - 0.04)[:, None] & ~over_pad[:, None],
        np.concatenate([tcp[:, :2], carry_height], axis=1),
        np.concatenate([pad_for_tcp, carry_height], axis=1),
    )
    lower = np.concatenate([pad_for_tcp, np.full((n, 1), CUBE_HALF_SIZE_M + 0.004)], axis=1)
    target = np.where(holding[:, None], np.where(over_pad[:, None], lower, carry), target)
    release = holding & over_pad & (cube[:, 2] < CUBE_HALF_SIZE_M + 0.008)
    placed = (to_pad < 0.03) & (cube[:, 2] < CUBE_HALF_SIZE_M + 0.008) & ~holding
    gripper = np.where(release | placed, OPEN, gripper)
    retreat = np.concatenate([tcp[:, :2], carry_height], axis=1)
    target = np.where((release | placed)[:, None], retreat, target)
    return _move(tcp, target, gripper, max_step_m)


SCRIPTED_POLICIES: dict[str, Callable[[dict, float], np.ndarray]] = {
    "reach": reach_policy,
    "push": push_policy,
    "lift": lift_policy,
    "pick_place": pick_place_policy,
}


def scripted_action(task: str, obs: dict, max_step_m: float | None = None) -> torch.Tensor:
    """``ee_delta_pos`` action [N, 4] (float32) of the scripted policy of ``task`` (noisy actions:
    ``ScriptedExpert``)."""
    step = ControllerSettings().max_ee_step_m if max_step_m is None else max_step_m
    return torch.from_numpy(SCRIPTED_POLICIES[task](obs, step).astype(np.float32))


class ScriptedExpert:
    """A scripted policy bound to one task, with its own seeded noise stream.

    ``act`` returns ``(executed, clean)``: the noisy action to send to the env and the noiseless
    expert action for the same observation (identical when ``noise_std == 0``), so demonstrations
    can record the clean expert label for states the noise drove the robot into. The noise
    (standard deviation ``noise_std``, normalised action units) moves the xyz deltas only, clipped
    to [-1, 1]: a flipped gripper drops the cube instead of diversifying motion.
    """

    def __init__(
        self, task: str, noise_std: float = 0.0, seed: int = 0, max_step_m: float | None = None
    ) -> None:
        if task not in SCRIPTED_POLICIES:
            raise KeyError(f"no scripted policy for task {task!r}; known: {sorted(SCRIPTED_POLICIES)}")
        if noise_std < 0.0:
            raise ValueError(f"noise_std must be >= 0, got {noise_std}")
        self.task = task
        self.noise_std = noise_std
        self.max_step_m = max_step_m
        self.generator = np.random.default_rng(seed)

    def act(self, obs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        clean = scripted_action(self.task, obs, self.max_step_m)
        if self.noise_std == 0.0:
            return clean, clean
        noise = self.generator.normal(0.0, self.noise_std, (len(clean), 3)).astype(np.float32)
        executed = clean.clone()
        executed[:, :3] = torch.clamp(clean[:, :3] + torch.from_numpy(noise), -1.0, 1.0)
        return executed, clean

    def __call__(self, obs: dict) -> torch.Tensor:
        return self.act(obs)[0]
