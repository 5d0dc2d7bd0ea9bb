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
from vla_rl.sims.tasks.base import CUBE_HALF_SIZE_M, GRASP_OPENING_RANGE_M
from vla_rl.sims.tasks.lift import LiftTask
from vla_rl.sims.tasks.pick_place import PickPlaceTask
from vla_rl.sims.tasks.push import PushTask
from vla_rl.sims.tasks.reach import ReachTask

OPEN, CLOSED = 1.0, -1.0
HOVER_HEIGHT_M = 0.09
CARRY_HEIGHT_M = 0.12
XY_ALIGNED_M = 0.008
GRASP_REACHED_M = 0.012


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
    above = np.concatenate([cube[:, :2], np.full((len(cube), 1), cube[:, 2:].max() + HOVER_HEIGHT_M)], axis=1)
    above[:, 2] = cube[:, 2] + HOVER_HEIGHT_M
    # Far in xy and low: rise first, so the fingers do not sweep through objects.
    rise = (xy_error > 2 * XY_ALIGNED_M) & (tcp[:, 2] < cube[:, 2] + HOVER_HEIGHT_M - 0.03)
    target = np.where((xy_error > XY_ALIGNED_M)[:, None], above, cube)
    target = np.where(rise[:, None], np.concatenate([tcp[:, :2], above[:, 2:]], axis=1), target)
    gripper = np.where(at_cube | holding, CLOSED, OPEN)
    return target, gripper, holding


def reach_policy(obs: dict, max_step_m: float) -> np.ndarray:
    priv = ReachTask.privileged_fields
    target = split_fields(obs["privileged"].numpy(), priv)["target_pos"]
    tcp = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)["tcp_pos"]
    return _move(tcp, target, np.full(len(tcp), OPEN), max_step_m)


def push_policy(obs: dict, max_step_m: float) -> np.ndarray:
    p = split_fields(obs["privileged"].numpy(), PushTask.privileged_fields)
    tcp = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)["tcp_pos"]
    cube, goal = p["cube_pos"], p["target_xy"]
    direction = goal - cube[:, :2]
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-9)
    rel = tcp[:, :2] - cube[:, :2]
    along = np.sum(rel * direction, axis=1)
    lateral = np.abs(rel[:, 0] * direction[:, 1] - rel[:, 1] * direction[:, 0])
    push_height = np.full((len(tcp), 1), CUBE_HALF_SIZE_M)
    behind = cube[:, :2] - direction * 0.055
    pushing = (along < -0.03) & (lateral < 0.02) & (tcp[:, 2] < 0.045)
    # Push through the cube towards the goal, correcting the lateral offset.
    push_target = np.concatenate([cube[:, :2] + direction * 0.03, push_height], axis=1)
    near_behind = np.linalg.norm(tcp[:, :2] - behind, axis=1) < 0.012
    descend_target = np.concatenate([behind, push_height], axis=1)
    hover = np.concatenate([behind, np.full((len(tcp), 1), 0.07)], axis=1)
    rise = np.concatenate([tcp[:, :2], np.full((len(tcp), 1), 0.07)], axis=1)
    target = np.where(
        near_behind[:, None], descend_target, np.where((tcp[:, 2] < 0.05)[:, None], rise, hover)
    )
    target = np.where(pushing[:, None], push_target, target)
    return _move(tcp, target, np.full(len(tcp), CLOSED), max_step_m)


def lift_policy(obs: dict, max_step_m: float) -> np.ndarray:
    p = split_fields(obs["privileged"].numpy(), LiftTask.privileged_fields)
    prop = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)
    tcp, opening = prop["tcp_pos"], prop["gripper_opening_m"][:, 0]
    cube = p["cube_pos"]
    target, gripper, holding = _pick_targets(tcp, cube, opening)
    lift = np.concatenate([tcp[:, :2], np.full((len(tcp), 1), CARRY_HEIGHT_M)], axis=1)
    target = np.where(holding[:, None], lift, target)
    return _move(tcp, target, gripper, max_step_m)


def pick_place_policy(obs: dict, max_step_m: float) -> np.ndarray:
    p = split_fields(obs["privileged"].numpy(), PickPlaceTask.privileged_fields)
    prop = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)
    tcp, opening = prop["tcp_pos"], prop["gripper_opening_m"][:, 0]
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
    """``ee_delta_pos`` action [N, 4] (float32) of the scripted policy of ``task``."""
    step = ControllerSettings().max_ee_step_m if max_step_m is None else max_step_m
    return torch.from_numpy(SCRIPTED_POLICIES[task](obs, step).astype(np.float32))
