"""LIBERO's GPU kit and checks on real LIBERO (`make test-libero`, in `.venv-libero`): the kit's tree,
built from the committed file list alone, opens and renders a LIBERO-Object scene with nothing of
the installed robosuite, LIBERO or assets in reach, and the LIBERO preflight renders a scene and
then refuses a machine without CUDA."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from benchmarks import gpu_checks, gpu_kit_libero

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("libero") is None,
    reason="LIBERO is not installed here; `make test-libero` runs these tests in .venv-libero",
)
HEADLESS = {**os.environ, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}

# Run with only the kit's tree ahead of site-packages: where each package comes from, then one
# LIBERO-Object world (in its worker process) reset and rendered.
FROM_THE_TREE = """
import sys, robosuite, libero
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env
from vla_rl.sims.libero.tasks import resolve_assets_dir
print("robosuite", robosuite.__file__)
print("libero", list(libero.__path__)[0])
print("assets", resolve_assets_dir(None))
cfg = EnvConfig(backend="libero", task="libero_object/9", num_envs=1, cameras=["agentview"], image_size=32)
env = make_env(cfg)
frame = env.reset(seed=0)[0]["rgb_agentview"].float()
env.close()
print("std", frame.std().item())
"""


def test_libero_object_opens_and_renders_from_the_kits_tree_alone(tmp_path):
    site = gpu_kit_libero.site_packages(Path(sys.executable))
    listed = gpu_kit_libero.FILES.read_text().split()
    assert all((site / name).is_file() for name in listed), "the list names files this venv lacks"
    members = gpu_kit_libero.tree_files(site, listed)
    archive = gpu_kit_libero.write_tree(site, members, tmp_path / gpu_kit_libero.TREE_NAME)
    tree = tmp_path / "tree"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    env = {**HEADLESS, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", FROM_THE_TREE], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    for name in ("robosuite", "libero", "assets"):
        assert lines[name].startswith(str(tree)), f"{name} came from {lines[name]}, not the tree"
    assert float(lines["std"]) > 5.0  # a scene, not a blank frame


def test_the_libero_preflight_renders_a_scene_then_refuses_a_machine_without_cuda():
    preflight = [sys.executable, "-c", gpu_checks.LIBERO_PREFLIGHT]
    done = subprocess.run(preflight, env=HEADLESS, capture_output=True, text=True, cwd=gpu_checks.REPO_ROOT)
    assert "mujoco 3.3.7 robosuite 1.4.0" in done.stdout, done.stderr[-3000:]
    assert "frame (1, 64, 64, 3)" in done.stdout
    assert done.returncode == 1 and "no CUDA device" in done.stderr
