"""Lift: grasp a cube and raise it above the table."""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from vla_rl.robots.torch_rotations import euclidean_norm
from vla_rl.sims.mujoco.randomization import RandomizationSplit, sample_object_rgba, sample_table_xy
from vla_rl.sims.mujoco.scene import add_cube
from vla_rl.sims.tasks.base import (
    CUBE_HALF_SIZE_M,
    Task,
    TaskState,
    as_float,
    closeness,
    closeness_torch,
    is_grasped,
    is_grasped_torch,
    place_cube,
)

SUCCESS_HEIGHT_M = 0.05


class LiftTask(Task):
    name = "lift"
    default_max_episode_steps = 80
    goal_dim = 1
    privileged_fields = (("cube_pos", 3), ("tcp_to_cube", 3), ("cube_height_m", 1))
    object_fields = ("cube_pos",)

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        add_cube(spec, "cube", CUBE_HALF_SIZE_M, [0.8, 0.2, 0.2, 1.0])

    def reset_world(self, model, data, rng, split: RandomizationSplit, goal: np.ndarray) -> None:
        place_cube(model, data, rng, "cube", sample_table_xy(rng, split))
        model.geom_rgba[model.geom("cube_geom").id] = sample_object_rgba(rng, split)
        goal[0] = CUBE_HALF_SIZE_M

    def instruction(self, goal: np.ndarray, split: RandomizationSplit) -> str:
        return "pick up the cube"

    def privileged(self, state: TaskState) -> np.ndarray:
        cube = self.sensor(state, "cube_pos")
        return np.concatenate([cube, cube - state.tcp_pos, cube[:, 2:] - state.goals[:, :1]], axis=-1)

    def reward_and_success(self, state: TaskState) -> tuple[np.ndarray, np.ndarray]:
        cube = self.sensor(state, "cube_pos")
        grasped = is_grasped(state.tcp_pos, cube, state.gripper_opening_m)
        height = cube[:, 2] - state.goals[:, 0]
        success = grasped & (height > SUCCESS_HEIGHT_M)
        reach = closeness(np.linalg.norm(cube - state.tcp_pos, axis=-1))
        lifted = np.clip(height / SUCCESS_HEIGHT_M, 0.0, 1.0)
        return 0.25 * reach + 0.15 * grasped + 0.5 * grasped * lifted + 0.1 * success, success

    def privileged_torch(self, state: TaskState) -> torch.Tensor:
        cube = self.sensor(state, "cube_pos")
        return torch.cat([cube, cube - state.tcp_pos, cube[:, 2:] - state.goals[:, :1]], dim=-1)

    def reward_and_success_torch(self, state: TaskState) -> tuple[torch.Tensor, torch.Tensor]:
        cube = self.sensor(state, "cube_pos")
        grasped = is_grasped_torch(state.tcp_pos, cube, state.gripper_opening_m)
        height = cube[:, 2] - state.goals[:, 0]
        success = grasped & (height > SUCCESS_HEIGHT_M)
        reach = closeness_torch(euclidean_norm(cube - state.tcp_pos))
        lifted = torch.clamp(height / SUCCESS_HEIGHT_M, 0.0, 1.0)
        held = as_float(grasped, reach)
        return 0.25 * reach + 0.15 * held + 0.5 * held * lifted + 0.1 * as_float(success, reach), success
