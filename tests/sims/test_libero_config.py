"""The LIBERO backend's configuration side: task names, assets directory, LIBERO's config file,
availability, and the image/orientation helpers. None of this needs LIBERO installed."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from vla_rl.sims.libero.env import check_config
from vla_rl.sims.libero.tasks import (
    ASSET_SUBDIRS,
    ASSETS_ENV_VAR,
    TaskSpec,
    assets_problem,
    parse_task,
    resolve_assets_dir,
    write_libero_config,
)
from vla_rl.sims.libero.worker import orient_image, quat_xyzw_to_axis_angle

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import backend_unavailable_reason, make_env

LIBERO_INSTALLED = importlib.util.find_spec("libero") is not None


def test_task_names_pick_one_task_some_tasks_or_a_whole_suite():
    assert parse_task("libero_spatial/3") == TaskSpec("libero_spatial", (3,))
    assert parse_task("libero_object/2+3") == TaskSpec("libero_object", (2, 3))
    assert parse_task("libero_90/89") == TaskSpec("libero_90", (89,))
    assert parse_task("libero_goal") == TaskSpec("libero_goal", tuple(range(10)))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("libero_spatial/10", r"task index '10' .* \[0, 10\)"),
        ("libero_10/x", r"task index 'x'"),
        ("libero_10/1+", r"task index ''"),
        ("libero_10/1+1", r"names a task twice"),
        ("libero_100/0", r"unknown LIBERO suite 'libero_100'"),
        ("reach", r"unknown LIBERO suite 'reach'"),
    ],
)
def test_bad_task_names_are_rejected_with_the_expected_form(name, message):
    with pytest.raises(ValueError, match=message):
        parse_task(name)


def test_bad_options_are_rejected_before_anything_starts():
    with pytest.raises(ValueError, match="unknown env.options for libero: \\['asset_dir'\\]"):
        check_config(EnvConfig(backend="libero", task="libero_spatial/0", options={"asset_dir": "/x"}))
    with pytest.raises(ValueError, match="warmup_steps"):
        check_config(EnvConfig(backend="libero", task="libero_spatial/0", options={"warmup_steps": -1}))
    with pytest.raises(ValueError, match="image_orientation"):
        check_config(
            EnvConfig(backend="libero", task="libero_spatial/0", options={"image_orientation": "flip"})
        )
    with pytest.raises(ValueError, match="env.options.workers"):
        check_config(EnvConfig(backend="libero", task="libero_spatial/0", options={"workers": 0}))
    with pytest.raises(ValueError, match="'env.cameras': \\['image', 'agentview'\\] names one camera twice"):
        check_config(EnvConfig(backend="libero", task="libero_spatial/0", cameras=["image", "agentview"]))
    with pytest.raises(ValueError, match="env.options.first_init_state"):
        check_config(EnvConfig(backend="libero", task="libero_spatial/0", options={"first_init_state": -1}))
    with pytest.raises(ValueError, match="env.options.hard_reset"):
        check_config(EnvConfig(backend="libero", task="libero_spatial/0", options={"hard_reset": "yes"}))
    options = check_config(EnvConfig(backend="libero", task="libero_object/2"))
    assert options == {
        "assets_dir": None,
        "warmup_steps": 10,
        "image_orientation": "upright",
        "hard_reset": False,
        "init_states": "random",
        "first_init_state": 0,
        "workers": 1,
    }


def test_missing_assets_directory_is_named_in_the_error(tmp_path, monkeypatch):
    monkeypatch.delenv(ASSETS_ENV_VAR, raising=False)
    missing = tmp_path / "no-such-assets"
    cfg = EnvConfig(
        backend="libero", task="libero_spatial/0", num_envs=2, options={"assets_dir": str(missing)}
    )
    with pytest.raises(ValueError, match=f"assets directory {missing} is missing"):
        make_env(cfg)


def test_assets_directory_comes_from_option_then_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(ASSETS_ENV_VAR, str(tmp_path / "from-env"))
    assert resolve_assets_dir(tmp_path / "from-option") == tmp_path / "from-option"
    assert resolve_assets_dir(None) == tmp_path / "from-env"
    incomplete = tmp_path / "from-env"
    (incomplete / "scenes").mkdir(parents=True)
    assert "no articulated_objects, stable_scanned_objects, turbosquid_objects" in assets_problem(incomplete)
    for name in ASSET_SUBDIRS:
        (incomplete / name).mkdir(exist_ok=True)
    assert assets_problem(incomplete) is None


@pytest.mark.skipif(LIBERO_INSTALLED, reason="LIBERO is installed: the backend may be available")
def test_backend_names_what_it_needs_when_libero_is_missing():
    reason = backend_unavailable_reason("libero")
    assert reason is not None and "libero" in reason and "robosuite" in reason and "README" in reason


def test_written_libero_config_holds_the_paths_libero_reads(tmp_path):
    package = tmp_path / "site" / "libero" / "libero"
    path = write_libero_config(tmp_path / "cfg", package, Path("/data/it's assets"))
    assert path == tmp_path / "cfg" / "config.yaml"
    assert yaml.safe_load(path.read_text()) == {
        "benchmark_root": str(package),
        "bddl_files": str(package / "bddl_files"),
        "init_states": str(package / "init_files"),
        "datasets": str(tmp_path / "site" / "datasets"),
        "assets": "/data/it's assets",
    }


def test_images_are_turned_the_right_way_up():
    rendered = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)  # rows bottom-up, as OpenGL
    upright = orient_image(rendered, "upright")
    assert upright[0].tolist() == rendered[1].tolist() and upright[1].tolist() == rendered[0].tolist()
    rotated = orient_image(rendered, "rotate180")
    assert (
        rotated[0, 0].tolist() == rendered[1, 2].tolist()
        and rotated[1, 2].tolist() == rendered[0, 0].tolist()
    )
    assert upright.flags.c_contiguous and rotated.flags.c_contiguous


def test_quaternion_to_axis_angle():
    half = math.pi / 4  # a quarter turn about z: (x, y, z, w) = (0, 0, sin(pi/4), cos(pi/4))
    np.testing.assert_allclose(
        quat_xyzw_to_axis_angle(np.array([0, 0, math.sin(half), math.cos(half)])), [0, 0, math.pi / 2]
    )
    np.testing.assert_allclose(quat_xyzw_to_axis_angle(np.array([1.0, 0, 0, 0])), [math.pi, 0, 0])
    assert quat_xyzw_to_axis_angle(np.array([0, 0, 0, 1.0])).tolist() == [0, 0, 0]
