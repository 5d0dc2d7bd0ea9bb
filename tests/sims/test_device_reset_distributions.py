"""``DeviceResetSampler``'s sampled quantities have the numpy path's distributions: two-sample KS and
chi-square tests at fixed seeds, with negative controls showing that the check rejects a shifted
sample and skewed indices. The sampler and the worlds-as-arrays helpers: ``test_device_resets.py``.
"""

from __future__ import annotations

import copy
import functools

import mujoco
import numpy as np
import pytest
from scipy import stats
from test_device_resets import (
    DEVICES,
    LAYOUTS,
    MIN_P_VALUE,
    PARITY_WORLDS,
    SPLIT_NAMES,
    TASK_NAMES,
    Worlds,
    _hsv,
    _model,
    _numpy_worlds,
    _sample,
    _torch_worlds,
)


# ---------------------------------------------------------------------- distributions
def _quat_multiply_np(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise ``mju_mulQuat`` of [n, 4] ``a`` with one quaternion ``b``."""
    out = np.empty_like(a)
    for row, quat in zip(out, a, strict=True):
        mujoco.mju_mulQuat(row, quat, b)
    return out


def _scene_quantities(worlds: Worlds, base: mujoco.MjModel) -> dict[str, np.ndarray]:
    light, cam, table = base.light("key").id, base.camera("front").id, base.geom("table").id
    light_offset = worlds.fields["light_pos"][:, light] - base.light_pos[light]
    cam_offset = worlds.fields["cam_pos"][:, cam] - base.cam_pos[cam]
    base_inverse = base.cam_quat[cam] * [1, -1, -1, -1]
    rotation = _quat_multiply_np(worlds.fields["cam_quat"][:, cam], base_inverse)
    half_angle = np.arccos(np.clip(np.abs(rotation[:, 0]), 0.0, 1.0))
    result = {"table_grey": worlds.fields["geom_rgba"][:, table, 0]}
    result["light_diffuse"] = worlds.fields["light_diffuse"][:, light, 0]
    result |= {f"light_d{a}": light_offset[:, i] for i, a in enumerate("xyz")}
    result |= {f"camera_d{a}": cam_offset[:, i] for i, a in enumerate("xyz")}
    result["camera_angle"] = 2 * half_angle
    result["camera_axis_z"] = rotation[:, 3] * np.sign(rotation[:, 0]) / np.sin(half_angle)
    return result


def _task_quantities(worlds: Worlds, task_name: str, base: mujoco.MjModel) -> dict[str, np.ndarray]:
    layout, result = LAYOUTS[task_name], {}
    for cube in layout.cubes:
        adr = base.joint(f"{cube}_joint").qposadr[0]
        result[f"{cube}_x"], result[f"{cube}_y"] = worlds.qpos[:, adr], worlds.qpos[:, adr + 1]
        result[f"{cube}_yaw"] = 2 * np.arctan2(worlds.qpos[:, adr + 6], worlds.qpos[:, adr + 3])
    for marker in layout.markers:
        pos = worlds.mocap_pos[:, base.body(marker).mocapid[0]]
        result[f"{marker}_x"], result[f"{marker}_y"] = pos[:, 0], pos[:, 1]
        if task_name == "reach":
            result[f"{marker}_height"] = pos[:, 2]
    if task_name == "push":
        gap_x, gap_y = result["target_x"] - result["cube_x"], result["target_y"] - result["cube_y"]
        result["push_distance"] = np.hypot(gap_x, gap_y)
    for geom in (*layout.object_geoms, *layout.named_geoms):
        hsv = np.array([_hsv(rgba) for rgba in worlds.fields["geom_rgba"][:, base.geom(geom).id]])
        centre = layout.named_geoms.get(geom)
        result[f"{geom}_hue"] = hsv[:, 0] if centre is None else (hsv[:, 0] - centre + 0.5) % 1.0 - 0.5
        result[f"{geom}_saturation"], result[f"{geom}_value"] = hsv[:, 1], hsv[:, 2]
    return result


def _categories(worlds: Worlds, task_name: str) -> dict[str, np.ndarray]:
    if task_name != "pick_place":
        return {}
    return {
        name: worlds.goals[:, i].astype(int) for i, name in enumerate(("cube_index", "pad_index", "template"))
    }


def _p_values(a: Worlds, b: Worlds, task_name: str) -> dict[str, float]:
    """p-value of each sampled quantity: two-sample KS (continuous), chi-square (indices)."""
    base = _model(task_name)[0]
    qa = _scene_quantities(a, base) | _task_quantities(a, task_name, base)
    qb = _scene_quantities(b, base) | _task_quantities(b, task_name, base)
    p = {name: float(stats.ks_2samp(qa[name], qb[name]).pvalue) for name in qa}
    ca, cb = _categories(a, task_name), _categories(b, task_name)
    for name in ca:
        values = np.union1d(ca[name], cb[name])
        table = [[np.sum(c[name] == v) for v in values] for c in (ca, cb)]
        p[name] = float(stats.chi2_contingency(table).pvalue)
    return p


@functools.cache
def _parity_worlds(task_name: str, split_name: str, device: str = "cpu") -> tuple[Worlds, Worlds]:
    numpy_worlds = _numpy_worlds(task_name, split_name, PARITY_WORLDS, seed=2024)
    return numpy_worlds, _torch_worlds(
        _sample(task_name, split_name, PARITY_WORLDS, seed=2024, device=device)
    )


@pytest.mark.parametrize("split_name", SPLIT_NAMES)
@pytest.mark.parametrize("task_name", TASK_NAMES)
def test_distributions_match_the_numpy_path(task_name: str, split_name: str) -> None:
    p = _p_values(*_parity_worlds(task_name, split_name), task_name)
    rejected = {name: value for name, value in p.items() if value <= MIN_P_VALUE}
    assert not rejected, f"differ from the numpy path: {rejected}"
    assert len(p) >= 12


@pytest.mark.parametrize("device", DEVICES[1:])
def test_distributions_match_the_numpy_path_on_cuda(device: str) -> None:
    p = _p_values(*_parity_worlds("pick_place", "ood_position", device), "pick_place")
    assert all(value > MIN_P_VALUE for value in p.values()), p


def test_the_parity_check_rejects_a_shifted_sample() -> None:
    numpy_worlds, torch_worlds = _parity_worlds("push", "train")
    shifted = copy.deepcopy(torch_worlds)
    adr = _model("push")[0].joint("cube_joint").qposadr[0]
    shifted.qpos[:, adr] += 0.02  # cube x 2 cm further
    assert _p_values(numpy_worlds, shifted, "push")["cube_x"] <= MIN_P_VALUE


def test_the_parity_check_rejects_skewed_indices() -> None:
    numpy_worlds, torch_worlds = _parity_worlds("pick_place", "train")
    skewed = copy.deepcopy(torch_worlds)
    skewed.goals[: PARITY_WORLDS // 5, 0] = 0  # a fifth of the worlds always name the red cube
    assert _p_values(numpy_worlds, skewed, "pick_place")["cube_index"] <= MIN_P_VALUE
