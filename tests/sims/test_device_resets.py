"""``DeviceResetSampler``: batched torch resets give the numpy path's worlds.

Each sample is written into a real ``MjModel``/``MjData`` and checked against the invariants of the
numpy reset (``MujocoBatchedEnv._reset_worlds``); seeded samples repeat; the distributions are
checked in ``test_device_reset_distributions.py``.
"""

from __future__ import annotations

import colorsys
import copy
import functools
import itertools
from dataclasses import dataclass, field

import mujoco
import numpy as np
import pytest
import torch
from vla_rl.robots.panda import PANDA
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv, build_model
from vla_rl.sims.mujoco.device_randomization import (
    axis_angle_quat,
    hsv_to_rgb,
    quat_multiply,
    redraw_failed,
)
from vla_rl.sims.mujoco.device_resets import TASK_RESETS, DeviceResetSampler, ResetSample
from vla_rl.sims.mujoco.randomization import (
    OUTER_XY_HIGH,
    OUTER_XY_LOW,
    RANDOMIZED_MODEL_FIELDS,
    SPLITS,
    RandomizationSplit,
    in_train_region,
    randomize_scene,
)
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

from vla_rl.envs.config import EnvConfig

TASK_NAMES = ("reach", "push", "lift", "pick_place")
SPLIT_NAMES = ("train", "ood_position", "ood_visual")
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="torch.cuda.is_available() is false: no GPU to sample on"
        ),
    ),
]
PARITY_WORLDS = 2000
MIN_P_VALUE = 0.001
TOLERANCE = 1e-9
COLOUR_TOLERANCE = 1e-6
"""MuJoCo keeps colours and light intensities in float32."""


@dataclass(frozen=True)
class Layout:
    """What a task's reset places and colours (body and geom names of its scene)."""

    cubes: tuple[str, ...]
    markers: tuple[str, ...]
    object_geoms: tuple[str, ...] = ()
    """Geoms coloured by ``sample_object_rgba``."""
    named_geoms: dict[str, float] = field(default_factory=dict)
    """Geoms coloured by ``sample_named_rgba`` -> the colour's hue."""


LAYOUTS = {
    "reach": Layout((), ("target",), ("target_geom",)),
    "push": Layout(("cube",), ("target",), ("cube_geom",)),
    "lift": Layout(("cube",), (), ("cube_geom",)),
    "pick_place": Layout(
        tuple(f"cube_{c}" for c in COLOURS),
        tuple(f"pad_{c}" for c in COLOURS),
        named_geoms={f"{kind}_{c}_geom": COLOUR_HUES[c] for c in COLOURS for kind in ("cube", "pad")},
    ),
}


@functools.cache
def _model(task_name: str) -> tuple[mujoco.MjModel, Task]:
    return build_model(EnvConfig(task=task_name))


def _sample(task_name: str, split_name: str, count: int, seed: int, device: str = "cpu") -> ResetSample:
    base, task = _model(task_name)
    sampler = DeviceResetSampler(base, task, PANDA, SPLITS[split_name], torch.device(device))
    return sampler.sample(count, torch.Generator(device).manual_seed(seed))


# ------------------------------------------------------------------- worlds as arrays
@dataclass
class Worlds:
    """n reset worlds as numpy arrays (from either path)."""

    qpos: np.ndarray
    mocap_pos: np.ndarray
    goals: np.ndarray
    fields: dict[str, np.ndarray]


def _torch_worlds(sample: ResetSample) -> Worlds:
    fields = {name: value.cpu().numpy() for name, value in sample.model_fields.items()}
    return Worlds(
        sample.qpos.cpu().numpy(), sample.mocap_pos.cpu().numpy(), sample.goals.cpu().numpy(), fields
    )


def _numpy_worlds(task_name: str, split_name: str, count: int, seed: int) -> Worlds:
    """``count`` resets of the numpy path: ``randomize_scene`` and ``task.reset_world`` on a model
    copy, one seeded generator per world, as ``_reset_worlds`` does."""
    base, task = _model(task_name)
    split = SPLITS[split_name]
    model, rows = copy.copy(base), []
    data = mujoco.MjData(model)
    for entropy in np.random.SeedSequence(seed).spawn(count):
        rng, goal = np.random.default_rng(entropy), np.zeros(task.goal_dim)
        mujoco.mj_resetData(model, data)
        randomize_scene(model, base, rng, split)
        task.reset_world(model, data, rng, split, goal)
        rows.append(
            (
                data.qpos.copy(),
                data.mocap_pos.copy(),
                goal,
                [getattr(model, n).copy() for n in RANDOMIZED_MODEL_FIELDS],
            )
        )
    qpos, mocap, goals, fields = zip(*rows, strict=True)
    by_name = {n: np.stack([f[i] for f in fields]) for i, n in enumerate(RANDOMIZED_MODEL_FIELDS)}
    return Worlds(np.stack(qpos), np.stack(mocap), np.stack(goals), by_name)


def _write_world(sample: ResetSample, i: int, base: mujoco.MjModel) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """World ``i`` of ``sample`` in its own model copy and data, after ``mj_forward``."""
    model = copy.copy(base)
    for name, value in sample.model_fields.items():
        getattr(model, name)[:] = value[i].cpu().numpy()
    data = mujoco.MjData(model)
    data.qpos[:] = sample.qpos[i].cpu().numpy()
    data.ctrl[:] = sample.ctrl[i].cpu().numpy()
    data.mocap_pos[:] = sample.mocap_pos[i].cpu().numpy()
    data.mocap_quat[:] = sample.mocap_quat[i].cpu().numpy()
    mujoco.mj_forward(model, data)
    return model, data


# ------------------------------------------------------------------------- invariants
def _in_split_region(xy: np.ndarray, split: RandomizationSplit) -> bool:
    if not split.position_ring:
        return bool(in_train_region(xy))
    in_outer = np.all((xy >= OUTER_XY_LOW) & (xy <= OUTER_XY_HIGH))
    return bool(in_outer and not in_train_region(xy))


def _hsv(rgb: np.ndarray) -> tuple[float, float, float]:
    return colorsys.rgb_to_hsv(*rgb[:3])


def _hue_offset(hue: float, centre: float) -> float:
    """Signed circular distance of hue from centre (hues wrap at 1)."""
    return (hue - centre + 0.5) % 1.0 - 0.5


@functools.cache
def _numpy_env_world(task_name: str, split_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """qpos, ctrl, mocap_quat and randomised-entry masks of one world reset by ``MujocoBatchedEnv``."""
    env = MujocoBatchedEnv(EnvConfig(task=task_name, split=split_name, num_envs=1, num_threads=1))
    try:
        env.reset(seed=3)
        model, data, base = env.models[0], env.datas[0], env.base_model
        masks = {n: getattr(model, n) != getattr(base, n) for n in RANDOMIZED_MODEL_FIELDS}
        return data.qpos.copy(), data.ctrl.copy(), data.mocap_quat.copy(), masks
    finally:
        env.close()


def _within(x: float, bounds: tuple[float, float], tolerance: float = COLOUR_TOLERANCE) -> bool:
    return bounds[0] - tolerance <= x <= bounds[1] + tolerance


def _check_scene(model: mujoco.MjModel, base: mujoco.MjModel, split: RandomizationSplit) -> None:
    grey = model.geom_rgba[model.geom("table").id]
    assert _within(grey[0], split.table_value_range)
    np.testing.assert_allclose(grey, [grey[0], grey[0] * 0.95, grey[0] * 0.9, 1.0], atol=COLOUR_TOLERANCE)
    light, cam = model.light("key").id, model.camera("front").id
    diffuse = model.light_diffuse[light]
    assert np.all(diffuse == diffuse[0]) and _within(diffuse[0], split.light_diffuse_range)
    light_offset_m = model.light_pos[light] - base.light_pos[light]
    assert np.all(np.abs(light_offset_m) <= split.light_pos_jitter_m + TOLERANCE)
    camera_offset_m = model.cam_pos[cam] - base.cam_pos[cam]
    assert np.all(np.abs(camera_offset_m) <= split.camera_pos_jitter_m + TOLERANCE)
    quat = model.cam_quat[cam]
    assert np.linalg.norm(quat) == pytest.approx(1.0, abs=TOLERANCE)
    angle = 2 * np.arccos(min(1.0, abs(float(quat @ base.cam_quat[cam]))))
    assert angle <= split.camera_rot_jitter_rad + 1e-6


def _check_objects(task_name: str, model, data, goal: np.ndarray, split: RandomizationSplit) -> None:
    layout = LAYOUTS[task_name]
    for cube in layout.cubes:
        pos, quat = data.body(cube).xpos, data.body(cube).xquat
        np.testing.assert_allclose(data.sensor(f"{cube}_pos").data, pos, atol=TOLERANCE)
        assert pos[2] == pytest.approx(CUBE_HALF_SIZE_M, abs=TOLERANCE)  # its bottom face on the table
        assert abs(quat[1]) < TOLERANCE and abs(quat[2]) < TOLERANCE  # turned about z only
        assert abs(2 * np.arctan2(quat[3], quat[0])) <= MAX_CUBE_YAW_RAD + TOLERANCE
        assert _in_split_region(pos[:2], split)
    for marker in layout.markers:
        pos = data.body(marker).xpos
        np.testing.assert_allclose(pos, data.mocap_pos[model.body(marker).mocapid[0]], atol=TOLERANCE)
        assert _in_split_region(pos[:2], split)
    for geom in layout.object_geoms:
        hue, saturation, value = _hsv(model.geom_rgba[model.geom(geom).id])
        assert any(_within(hue, hue_range) for hue_range in split.object_hue_ranges)
        assert _within(saturation, (0.7, 0.9)) and _within(value, (0.7, 0.9))
    for geom, centre in layout.named_geoms.items():
        hue, saturation, value = _hsv(model.geom_rgba[model.geom(geom).id])
        assert abs(_hue_offset(hue, centre)) <= split.named_colour_hue_jitter + COLOUR_TOLERANCE
        assert _within(saturation, (0.75, 0.95)) and _within(value, split.named_colour_value_range)
    assert all(contact.dist >= -TOLERANCE for contact in data.contact)  # nothing interpenetrates
    _check_goal(task_name, data, goal, split)


def _check_goal(task_name: str, data: mujoco.MjData, goal: np.ndarray, split: RandomizationSplit) -> None:
    if task_name == "reach":
        np.testing.assert_allclose(goal, data.body("target").xpos, atol=TOLERANCE)
        assert TARGET_HEIGHT_RANGE_M[0] <= goal[2] <= TARGET_HEIGHT_RANGE_M[1]
    elif task_name == "push":
        np.testing.assert_allclose(data.body("target").xpos, [*goal, 0.001], atol=TOLERANCE)
        gap_m = np.linalg.norm(goal - data.sensor("cube_pos").data[:2])
        assert PUSH_DISTANCE_RANGE_M[0] - TOLERANCE <= gap_m <= PUSH_DISTANCE_RANGE_M[1] + TOLERANCE
    elif task_name == "lift":
        assert goal.tolist() == [CUBE_HALF_SIZE_M]
        assert data.sensor("cube_pos").data[2] == pytest.approx(goal[0], abs=TOLERANCE)
    else:
        templates = HELDOUT_TEMPLATES if split.heldout_instructions else TRAIN_TEMPLATES
        assert goal[:3] == pytest.approx(np.round(goal[:3]))
        assert 0 <= goal[0] < len(COLOURS) and 0 <= goal[1] < len(COLOURS) and 0 <= goal[2] < len(templates)
        pads = np.stack([data.body(f"pad_{c}").xpos for c in COLOURS])
        np.testing.assert_allclose(
            pads, np.column_stack([goal[3:].reshape(-1, 2), np.full(3, 0.001)]), atol=TOLERANCE
        )
        cubes = np.stack([data.sensor(f"cube_{c}_pos").data[:2] for c in COLOURS])
        points = np.concatenate([cubes, pads[:, :2]])
        for a, b in itertools.combinations(points, 2):
            assert np.linalg.norm(a - b) >= MIN_SEPARATION_M - TOLERANCE


def _check_robot_part(task_name: str, split_name: str, sample: ResetSample, i: int, model, data) -> None:
    """Everything not random equals a world reset by ``MujocoBatchedEnv``; the same entries of the
    model arrays are randomised."""
    qpos, ctrl, mocap_quat, masks = _numpy_env_world(task_name, split_name)
    cube_entries = np.zeros(model.nq, bool)
    for cube in LAYOUTS[task_name].cubes:
        adr = model.joint(f"{cube}_joint").qposadr[0]
        cube_entries[adr : adr + 7] = True
    np.testing.assert_array_equal(data.qpos[~cube_entries], qpos[~cube_entries])
    np.testing.assert_array_equal(data.ctrl, ctrl)
    np.testing.assert_array_equal(data.mocap_quat, mocap_quat)
    base = _model(task_name)[0]
    for name in RANDOMIZED_MODEL_FIELDS:
        np.testing.assert_array_equal(getattr(model, name) != getattr(base, name), masks[name], err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("split_name", SPLIT_NAMES)
@pytest.mark.parametrize("task_name", TASK_NAMES)
def test_sampled_worlds_keep_the_numpy_reset_invariants(task_name: str, split_name: str, device: str) -> None:
    base, split = _model(task_name)[0], SPLITS[split_name]
    sample = _sample(task_name, split_name, 48, seed=11, device=device)
    for i in range(48):
        model, data = _write_world(sample, i, base)
        _check_scene(model, base, split)
        _check_objects(task_name, model, data, sample.goals[i].cpu().numpy(), split)
        _check_robot_part(task_name, split_name, sample, i, model, data)


# ------------------------------------------------------------------------ determinism
def _assert_samples_equal(a: ResetSample, b: ResetSample) -> None:
    for name in ("qpos", "ctrl", "mocap_pos", "mocap_quat", "goals"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    for name in RANDOMIZED_MODEL_FIELDS:
        assert torch.equal(a.model_fields[name], b.model_fields[name]), name


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("task_name", TASK_NAMES)
def test_same_seed_same_sample_other_seed_other_sample(task_name: str, device: str) -> None:
    first = _sample(task_name, "ood_position", 64, seed=5, device=device)
    torch.manual_seed(123)  # the global generator plays no part
    _assert_samples_equal(first, _sample(task_name, "ood_position", 64, seed=5, device=device))
    other = _sample(task_name, "ood_position", 64, seed=6, device=device)
    assert not (torch.equal(first.qpos, other.qpos) and torch.equal(first.mocap_pos, other.mocap_pos))
    for name in RANDOMIZED_MODEL_FIELDS:
        assert not torch.equal(first.model_fields[name], other.model_fields[name]), name


@pytest.mark.parametrize("task_name", TASK_NAMES)
def test_an_empty_reset_has_empty_rows(task_name: str) -> None:
    base, task = _model(task_name)
    sample = _sample(task_name, "ood_position", 0, seed=1)
    assert sample.qpos.shape == (0, base.nq) and sample.goals.shape == (0, task.goal_dim)
    assert sample.model_fields["geom_rgba"].shape == (0, base.ngeom, 4)


def test_a_generator_state_continues_to_new_samples() -> None:
    generator = torch.Generator().manual_seed(0)
    base, task = _model("push")
    sampler = DeviceResetSampler(base, task, PANDA, SPLITS["train"], torch.device("cpu"))
    first, second = sampler.sample(8, generator), sampler.sample(8, generator)
    assert not torch.equal(first.goals, second.goals)


# -------------------------------------------------------------------------- primitives
def test_hsv_to_rgb_equals_colorsys() -> None:
    hue = np.concatenate([np.linspace(0.0, 1.0, 61, endpoint=False), np.random.default_rng(0).random(200)])
    saturation = np.tile([0.0, 0.3, 0.85, 1.0], len(hue) // 4 + 1)[: len(hue)]
    value = np.linspace(0.2, 1.0, len(hue))
    ours = hsv_to_rgb(*(torch.as_tensor(a) for a in (hue, saturation, value))).numpy()
    expected = [colorsys.hsv_to_rgb(h, s, v) for h, s, v in zip(hue, saturation, value, strict=True)]
    np.testing.assert_array_equal(ours, expected)


def test_quaternion_helpers_equal_mujoco() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(2, 4))
    axis, angle = rng.normal(size=3), 0.7
    axis /= np.linalg.norm(axis)
    product, rotation = np.empty(4), np.empty(4)
    mujoco.mju_mulQuat(product, a, b)
    mujoco.mju_axisAngle2Quat(rotation, axis, angle)
    np.testing.assert_allclose(
        quat_multiply(torch.as_tensor(a), torch.as_tensor(b)).numpy(), product, atol=1e-15
    )
    ours = axis_angle_quat(torch.as_tensor(axis), torch.tensor(angle)).numpy()
    np.testing.assert_allclose(ours, rotation, atol=1e-15)


def test_exhausted_rejection_sampling_says_what_failed() -> None:
    def never(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(n, 2), torch.zeros(n, dtype=torch.bool)

    with pytest.raises(RuntimeError, match="rejection sampling of nothing .* 4 of 4 worlds in 3 rounds"):
        redraw_failed(4, never, torch.device("cpu"), "nothing", max_rounds=3)


def test_the_sampler_refuses_unknown_tasks() -> None:
    base, task = build_model(EnvConfig(task="reach"))
    task.name = "stack"
    with pytest.raises(ValueError, match="no device reset for task 'stack'"):
        DeviceResetSampler(base, task, PANDA, SPLITS["train"], torch.device("cpu"))
    assert set(TASK_RESETS) == set(TASK_NAMES)


@pytest.mark.parametrize("device", DEVICES[1:])
def test_the_sampler_refuses_a_generator_on_another_device(device: str) -> None:
    base, task = _model("reach")
    sampler = DeviceResetSampler(base, task, PANDA, SPLITS["train"], torch.device(device))
    with pytest.raises(ValueError, match="the generator is on cpu"):
        sampler.sample(2, torch.Generator("cpu"))
