"""Push: slide a cube across the table onto a target disc."""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from vla_rl.robots.torch_rotations import euclidean_norm
from vla_rl.sims.mujoco.randomization import RandomizationSplit, sample_object_rgba, sample_table_xy
from vla_rl.sims.mujoco.scene import add_cube, add_marker
from vla_rl.sims.tasks.base import (
    CUBE_HALF_SIZE_M,
    Task,
    TaskState,
    as_float,
    closeness,
    closeness_torch,
    place_cube,
)

SUCCESS_DISTANCE_M = 0.05
PUSH_DISTANCE_RANGE_M = (0.08, 0.16)


class PushTask(Task):
    name = "push"
    default_max_episode_steps = 80
    goal_dim = 2
    privileged_fields = (("cube_pos", 3), ("target_xy", 2), ("tcp_to_cube", 3), ("cube_to_target_xy", 2))
    object_fields = ("cube_pos", "target_xy")

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        add_cube(spec, "cube", CUBE_HALF_SIZE_M, [0.8, 0.2, 0.2, 1.0])
        add_marker(
            spec,
            "target",
            mujoco.mjtGeom.mjGEOM_CYLINDER,
            [SUCCESS_DISTANCE_M, 0.001, 0.0],
            [0.2, 0.8, 0.2, 0.5],
        )

    def reset_world(self, model, data, rng, split: RandomizationSplit, goal: np.ndarray) -> None:
        while True:
            cube_xy, target_xy = sample_table_xy(rng, split), sample_table_xy(rng, split)
            low, high = PUSH_DISTANCE_RANGE_M
            if low <= np.linalg.norm(target_xy - cube_xy) <= high:
                break
        place_cube(model, data, rng, "cube", cube_xy)
        data.mocap_pos[model.body("target").mocapid[0]] = (*target_xy, 0.001)
        model.geom_rgba[model.geom("cube_geom").id] = sample_object_rgba(rng, split)
        goal[:] = target_xy

    def instruction(self, goal: np.ndarray, split: RandomizationSplit) -> str:
        return "push the cube onto the target"

    def privileged(self, state: TaskState) -> np.ndarray:
        cube = self.sensor(state, "cube_pos")
        return np.concatenate([cube, state.goals, cube - state.tcp_pos, state.goals - cube[:, :2]], axis=-1)

    def reward_and_success(self, state: TaskState) -> tuple[np.ndarray, np.ndarray]:
        cube = self.sensor(state, "cube_pos")
        to_target = np.linalg.norm(state.goals - cube[:, :2], axis=-1)
        success = to_target < SUCCESS_DISTANCE_M
        reach = closeness(np.linalg.norm(cube - state.tcp_pos, axis=-1))
        return 0.25 * reach + 0.65 * closeness(to_target) + 0.1 * success, success

    def privileged_torch(self, state: TaskState) -> torch.Tensor:
        cube = self.sensor(state, "cube_pos")
        return torch.cat([cube, state.goals, cube - state.tcp_pos, state.goals - cube[:, :2]], dim=-1)

    def reward_and_success_torch(self, state: TaskState) -> tuple[torch.Tensor, torch.Tensor]:
        cube = self.sensor(state, "cube_pos")
        to_target = euclidean_norm(state.goals - cube[:, :2])
        success = to_target < SUCCESS_DISTANCE_M
        reach = closeness_torch(euclidean_norm(cube - state.tcp_pos))
        return 0.25 * reach + 0.65 * closeness_torch(to_target) + 0.1 * as_float(success, reach), success
