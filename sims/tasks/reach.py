"""Reach: move the TCP to a target point above the table."""

from __future__ import annotations

import mujoco
import numpy as np
import torch
from vla_rl.robots.torch_rotations import euclidean_norm
from vla_rl.sims.mujoco.randomization import RandomizationSplit, sample_object_rgba, sample_table_xy
from vla_rl.sims.mujoco.scene import add_marker, add_stem
from vla_rl.sims.tasks.base import Task, TaskState, as_float, closeness, closeness_torch

SUCCESS_DISTANCE_M = 0.05
TARGET_HEIGHT_RANGE_M = (0.05, 0.25)
STEM_LENGTH_M = 0.3
"""Longer than the highest target, so the rod always reaches the table."""


class ReachTask(Task):
    name = "reach"
    default_max_episode_steps = 50
    # Isaac Lab's reach agents (RSL-RL) use two 64-unit ELU layers for actor and critic: a 3-D target
    # needs no more, and on a CPU the smaller network leaves the rollout to the simulator.
    default_policy_hidden_sizes = (64, 64)
    goal_dim = 3
    privileged_fields = (("target_pos", 3), ("tcp_to_target", 3))
    object_fields = ("target_pos",)

    def build_scene(self, spec: mujoco.MjSpec) -> None:
        target = add_marker(
            spec, "target", mujoco.mjtGeom.mjGEOM_SPHERE, [0.02, 0.0, 0.0], [0.1, 0.8, 0.1, 0.6]
        )
        add_stem(target, STEM_LENGTH_M, 0.004, [0.2, 0.2, 0.2, 1.0])

    def reset_world(self, model, data, rng, split: RandomizationSplit, goal: np.ndarray) -> None:
        target = np.append(sample_table_xy(rng, split), rng.uniform(*TARGET_HEIGHT_RANGE_M))
        data.mocap_pos[model.body("target").mocapid[0]] = target
        model.geom_rgba[model.geom("target_geom").id, :3] = sample_object_rgba(rng, split)[:3]
        goal[:] = target

    def instruction(self, goal: np.ndarray, split: RandomizationSplit) -> str:
        return "move the gripper to the target"

    def privileged(self, state: TaskState) -> np.ndarray:
        return np.concatenate([state.goals, state.goals - state.tcp_pos], axis=-1)

    def reward_and_success(self, state: TaskState) -> tuple[np.ndarray, np.ndarray]:
        distance = np.linalg.norm(state.goals - state.tcp_pos, axis=-1)
        success = distance < SUCCESS_DISTANCE_M
        return 0.9 * closeness(distance) + 0.1 * success, success

    def privileged_torch(self, state: TaskState) -> torch.Tensor:
        return torch.cat([state.goals, state.goals - state.tcp_pos], dim=-1)

    def reward_and_success_torch(self, state: TaskState) -> tuple[torch.Tensor, torch.Tensor]:
        distance = euclidean_norm(state.goals - state.tcp_pos)
        success = distance < SUCCESS_DISTANCE_M
        return 0.9 * closeness_torch(distance) + 0.1 * as_float(success, distance), success
