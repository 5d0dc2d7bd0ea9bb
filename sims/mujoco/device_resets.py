"""Resets of the MuJoCo tasks sampled as batched torch operations on the env's device.

``DeviceResetSampler.sample(k, generator)`` gives what ``MujocoBatchedEnv._reset_worlds`` writes
into k worlds (robot at home with the fingers open, cubes placed, markers, goals, randomised
model arrays), drawn from one ``torch.Generator`` with the numpy path's distributions, so that a
device-resident env can reset worlds without a host round trip per world and a seeded reset
repeats. The per-task parts are the small functions of ``TASK_RESETS``; robot pose, cube poses and
scene randomisation (``device_randomization``) are shared.

Host syncs: none, except one per rejection round of the ``ood_position`` ring, push's
cube-to-target distance and pick_place's separated points (see ``redraw_failed``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco
import numpy as np
import torch
from torch import Tensor
from vla_rl.robots.panda import RobotDescription
from vla_rl.sims.mujoco.device_randomization import (
    Draws,
    SceneIds,
    TableRegion,
    first_accepted,
    randomize_scene_fields,
    redraw_failed,
    sample_named_rgba,
    sample_object_rgba,
    sample_separated_xy,
)
from vla_rl.sims.mujoco.randomization import RANDOMIZED_MODEL_FIELDS, RandomizationSplit
from vla_rl.sims.tasks.base import CUBE_HALF_SIZE_M, MAX_CUBE_YAW_RAD, Task
from vla_rl.sims.tasks.pick_place import (
    COLOUR_HUES,
    COLOURS,
    HELDOUT_TEMPLATES,
    MIN_SEPARATION_M,
    TRAIN_TEMPLATES,
)
from vla_rl.sims.tasks.push import PUSH_DISTANCE_RANGE_M
from vla_rl.sims.tasks.reach import TARGET_HEIGHT_RANGE_M

MARKER_HEIGHT_M = 0.001
"""Height of the flat markers (push's target disc, pick_place's pads), as the tasks write it."""
PUSH_CANDIDATES = 256
"""Candidate (cube, target) pairs per round for push. A pair of uniform points of the region is
0.08..0.16 m apart with probability 0.43 (train region; 0.148 in the ring, whose pairs of the outer
box lie in it with probability 0.708 ** 2): a block fails with probability 0.57 ** 256 = 1e-62
(train), 0.926 ** 256 = 3e-9 (ring) per world and round."""


@dataclass
class ResetSample:
    """What resetting k worlds writes: ``MjData`` values and the per-world model arrays."""

    qpos: Tensor
    """[k, nq] joint positions: arm at the robot's home, fingers open, cubes placed at rest (qvel,
    act and the rest of ``MjData`` are as ``mj_resetData`` leaves them: zero)."""
    ctrl: Tensor
    """[k, nu] actuator targets: arm home, each finger half the maximum opening (m)."""
    mocap_pos: Tensor
    """[k, nmocap, 3] marker positions (m)."""
    mocap_quat: Tensor
    """[k, nmocap, 4] marker orientations (the model's, (w, x, y, z))."""
    goals: Tensor
    """[k, goal_dim] what ``task.reset_world`` writes into the goal."""
    model_fields: dict[str, Tensor]
    """Name in ``RANDOMIZED_MODEL_FIELDS`` -> [k, *model array shape], the whole array of each world.
    Arrays MuJoCo stores as float32 (``geom_rgba``, ``light_diffuse``) come as float32, rounded as
    writing into an ``MjModel`` rounds them; the others in the sampler's dtype."""

    @classmethod
    def cat(cls, samples: list[ResetSample]) -> ResetSample:
        """The samples' worlds, in order, as one sample."""
        fields = ("qpos", "ctrl", "mocap_pos", "mocap_quat", "goals")
        rows = {name: torch.cat([getattr(s, name) for s in samples]) for name in fields}
        model_fields = {
            name: torch.cat([s.model_fields[name] for s in samples]) for name in samples[0].model_fields
        }
        return cls(**rows, model_fields=model_fields)


@dataclass
class TaskDraw:
    """What one task's reset sampled for k worlds (a batched ``Task.reset_world``)."""

    goals: Tensor
    """[k, goal_dim] goal values."""
    cube_xy_m: dict[str, Tensor] = field(default_factory=dict)
    """Cube body name (made by ``add_cube``) -> [k, 2] where it rests; the sampler turns it by a
    random yaw (``place_cube``)."""
    marker_pos_m: dict[str, Tensor] = field(default_factory=dict)
    """Mocap body name -> [k, 3] its position."""
    geom_rgba: dict[str, Tensor] = field(default_factory=dict)
    """Geom name -> [k, 3] colour (alpha kept) or [k, 4] colour and alpha."""


TaskReset = Callable[[Draws, RandomizationSplit, TableRegion, int], TaskDraw]
"""(draws, split, the split's table region, k) -> one task's part of k resets."""


def on_table(xy_m: Tensor) -> Tensor:
    """[k, 3] flat-marker positions at ``xy_m`` [k, 2]."""
    return torch.cat([xy_m, torch.full_like(xy_m[:, :1], MARKER_HEIGHT_M)], dim=-1)


def reach_reset(draws: Draws, split: RandomizationSplit, region: TableRegion, count: int) -> TaskDraw:
    """A target point above the region (``ReachTask.reset_world``)."""
    height_m = draws.uniform((count, 1), *TARGET_HEIGHT_RANGE_M)
    target_m = torch.cat([region.sample(draws, count), height_m], dim=-1)
    colour = sample_object_rgba(draws, split, count)[:, :3]
    return TaskDraw(goals=target_m, marker_pos_m={"target": target_m}, geom_rgba={"target_geom": colour})


def push_reset(draws: Draws, split: RandomizationSplit, region: TableRegion, count: int) -> TaskDraw:
    """A cube and a target disc 0.08..0.16 m apart (``PushTask.reset_world``)."""
    low_m, high_m = PUSH_DISTANCE_RANGE_M

    def attempt(n: int) -> tuple[Tensor, Tensor]:
        pairs = region.candidates(draws, (n, PUSH_CANDIDATES, 2))  # [n, m, (cube, target), xy]
        gap_m = torch.linalg.vector_norm(pairs[:, :, 1] - pairs[:, :, 0], dim=-1)
        accepted = region.contains(pairs).all(dim=-1) & (gap_m >= low_m) & (gap_m <= high_m)
        return first_accepted(pairs, accepted)

    pairs = redraw_failed(count, attempt, draws.device, "push's cube and target")
    return TaskDraw(
        goals=pairs[:, 1].contiguous(),
        cube_xy_m={"cube": pairs[:, 0]},
        marker_pos_m={"target": on_table(pairs[:, 1])},
        geom_rgba={"cube_geom": sample_object_rgba(draws, split, count)},
    )


def lift_reset(draws: Draws, split: RandomizationSplit, region: TableRegion, count: int) -> TaskDraw:
    """A cube on the region; the goal is its resting height (``LiftTask.reset_world``)."""
    return TaskDraw(
        goals=torch.full((count, 1), CUBE_HALF_SIZE_M, dtype=draws.dtype, device=draws.device),
        cube_xy_m={"cube": region.sample(draws, count)},
        geom_rgba={"cube_geom": sample_object_rgba(draws, split, count)},
    )


def pick_place_reset(draws: Draws, split: RandomizationSplit, region: TableRegion, count: int) -> TaskDraw:
    """Three coloured cubes and pads at separated points, a named cube, pad and instruction
    template (``PickPlaceTask.reset_world``)."""
    k = len(COLOURS)
    points = sample_separated_xy(draws, region, count, 2 * k, MIN_SEPARATION_M)
    templates = HELDOUT_TEMPLATES if split.heldout_instructions else TRAIN_TEMPLATES
    cube, pad, template = (draws.integers((count,), n) for n in (k, k, len(templates)))
    named = torch.stack([cube, pad, template], dim=-1).to(draws.dtype)
    goals = torch.cat([named, points[:, k:].flatten(start_dim=1)], dim=-1)
    result = TaskDraw(goals=goals)
    for i, colour in enumerate(COLOURS):
        hue = COLOUR_HUES[colour]
        result.cube_xy_m[f"cube_{colour}"] = points[:, i]
        result.marker_pos_m[f"pad_{colour}"] = on_table(points[:, k + i])
        result.geom_rgba[f"cube_{colour}_geom"] = sample_named_rgba(draws, split, count, hue)
        result.geom_rgba[f"pad_{colour}_geom"] = sample_named_rgba(draws, split, count, hue)[:, :3]
    return result


TASK_RESETS: dict[str, TaskReset] = {
    "reach": reach_reset,
    "push": push_reset,
    "lift": lift_reset,
    "pick_place": pick_place_reset,
}
"""Task name -> its part of a batched reset."""


def yaw_quat(yaw_rad: Tensor) -> Tensor:
    """[k, 4] rotations about world z by ``yaw_rad`` [k], (w, x, y, z)."""
    zero = torch.zeros_like(yaw_rad)
    return torch.stack([torch.cos(yaw_rad / 2), zero, zero, torch.sin(yaw_rad / 2)], dim=-1)


class DeviceResetSampler:
    """Samples k worlds' resets of ``task`` in ``split`` as tensors on ``device`` (see
    ``ResetSample``); model addresses are looked up once, here."""

    def __init__(
        self,
        base_model: mujoco.MjModel,
        task: Task,
        robot: RobotDescription,
        split: RandomizationSplit,
        device: torch.device,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        if task.name not in TASK_RESETS:
            raise ValueError(
                f"no device reset for task {task.name!r}; known: {', '.join(sorted(TASK_RESETS))}"
            )
        self.split, self.device, self.dtype = split, torch.device(device), dtype
        self.goal_dim = task.goal_dim
        self._task_reset = TASK_RESETS[task.name]
        self._region = TableRegion.of_split(split, self.device, dtype)
        self._scene_ids = SceneIds.of_model(base_model)
        self._home_qpos, self._home_ctrl = self._home(base_model, robot)
        mocap_bodies = [b for b in range(base_model.nbody) if base_model.body_mocapid[b] >= 0]
        mocap_bodies.sort(key=lambda b: base_model.body_mocapid[b])
        self._base_mocap_pos = self._tensor(base_model.body_pos[mocap_bodies].reshape(-1, 3))
        self._base_mocap_quat = self._tensor(base_model.body_quat[mocap_bodies].reshape(-1, 4))
        arrays = {name: getattr(base_model, name) for name in RANDOMIZED_MODEL_FIELDS}
        self._base_fields = {name: self._tensor(array) for name, array in arrays.items()}
        self._field_dtypes = {name: self._field_dtype(array) for name, array in arrays.items()}
        self._mocap_ids = {base_model.body(b).name: int(base_model.body_mocapid[b]) for b in mocap_bodies}
        self._geom_ids = {base_model.geom(g).name: g for g in range(base_model.ngeom)}
        free = [j for j in range(base_model.njnt) if base_model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
        self._free_qpos_adr = {base_model.joint(j).name: int(base_model.jnt_qposadr[j]) for j in free}
        self._check_task_names()

    def _field_dtype(self, array: np.ndarray) -> torch.dtype:
        """float32 for arrays MuJoCo keeps in float32, the sampler's dtype for the others."""
        return torch.float32 if array.dtype == np.float32 else self.dtype

    def _tensor(self, array: object) -> Tensor:
        return torch.as_tensor(array, dtype=self.dtype, device=self.device).clone()

    def _home(self, model: mujoco.MjModel, robot: RobotDescription) -> tuple[Tensor, Tensor]:
        """[nq] ``qpos0`` with the arm at home and the fingers open, [nu] the matching controls."""
        qpos, ctrl = self._tensor(model.qpos0), torch.zeros(model.nu, dtype=self.dtype, device=self.device)
        home, open_m = self._tensor(robot.home_arm_qpos), robot.gripper_max_opening_m / 2
        qpos[[model.joint(j).qposadr[0] for j in robot.arm_joint_names]] = home
        qpos[[model.joint(j).qposadr[0] for j in robot.gripper_joint_names]] = open_m
        ctrl[[model.actuator(a).id for a in robot.arm_actuator_names]] = home
        ctrl[model.actuator(robot.gripper_actuator_name).id] = open_m
        return qpos, ctrl

    def _check_task_names(self) -> None:
        """Fail here, not in the first reset, if the task places a body the model lacks."""
        draw = self._task_reset(self._draws(torch.Generator(self.device)), self.split, self._region, 1)
        missing = [f"{n}_joint" for n in draw.cube_xy_m if f"{n}_joint" not in self._free_qpos_adr]
        missing += [n for n in draw.marker_pos_m if n not in self._mocap_ids]
        missing += [n for n in draw.geom_rgba if n not in self._geom_ids]
        if missing or draw.goals.shape != (1, self.goal_dim):
            raise ValueError(
                f"the model lacks {missing} or goals {tuple(draw.goals.shape)} != (1, {self.goal_dim})"
            )

    def _draws(self, generator: torch.Generator) -> Draws:
        if generator.device.type != self.device.type:
            raise ValueError(f"the generator is on {generator.device}, the sampler on {self.device}")
        return Draws(generator, self.device, self.dtype)

    def sample(self, count: int, generator: torch.Generator) -> ResetSample:
        """Resets of ``count`` worlds, every draw from ``generator`` (same state, same sample)."""
        draws = self._draws(generator)
        fields = {name: base.expand(count, *base.shape).clone() for name, base in self._base_fields.items()}
        randomize_scene_fields(draws, self.split, self._scene_ids, fields)
        task_draw = self._task_reset(draws, self.split, self._region, count)
        for name, rgba in task_draw.geom_rgba.items():
            fields["geom_rgba"][:, self._geom_ids[name], : rgba.shape[-1]] = rgba
        for name, field_dtype in self._field_dtypes.items():
            fields[name] = fields[name].to(field_dtype)
        mocap_pos = self._base_mocap_pos.expand(count, -1, -1).clone()
        for name, pos_m in task_draw.marker_pos_m.items():
            mocap_pos[:, self._mocap_ids[name]] = pos_m
        return ResetSample(
            qpos=self._place_cubes(draws, task_draw.cube_xy_m, count),
            ctrl=self._home_ctrl.expand(count, -1).clone(),
            mocap_pos=mocap_pos,
            mocap_quat=self._base_mocap_quat.expand(count, -1, -1).clone(),
            goals=task_draw.goals,
            model_fields=fields,
        )

    def _place_cubes(self, draws: Draws, cube_xy_m: dict[str, Tensor], count: int) -> Tensor:
        """[count, nq] home qpos with each cube resting at its xy, turned by a random yaw."""
        qpos = self._home_qpos.expand(count, -1).clone()
        for name, xy_m in cube_xy_m.items():
            adr = self._free_qpos_adr[f"{name}_joint"]
            yaw_rad = draws.uniform((count,), -MAX_CUBE_YAW_RAD, MAX_CUBE_YAW_RAD)
            qpos[:, adr : adr + 2] = xy_m
            qpos[:, adr + 2] = CUBE_HALF_SIZE_M
            qpos[:, adr + 3 : adr + 7] = yaw_quat(yaw_rad)
        return qpos
