"""The kit for a GPU machine without the package index: wheels cut into bundles of a bounded size
come back identical, a missing or damaged piece is refused by name, and a real wheel built here
installs from its bundles and imports."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_kit, gpu_kit_libero


def wheels(tmp_path: Path, sizes: list[int]) -> list[Path]:
    folder = tmp_path / "wheels"
    folder.mkdir()
    paths = [folder / f"pkg{i}-1.0-py3-none-any.whl" for i in range(len(sizes))]
    for path, size in zip(paths, sizes, strict=True):
        path.write_bytes(os.urandom(size))
    return paths


def test_bundles_stay_within_their_size_and_join_back_to_the_same_wheels(tmp_path):
    files = wheels(tmp_path, [5000, 12000, 1000, 4096])
    bundles = gpu_kit.write_bundles(files, tmp_path / "kit", bundle_bytes=4096)
    assert len(bundles) == math.ceil(22096 / 4096) == 6
    for bundle in bundles:
        assert sum(p.stat().st_size for p in bundle.glob("*.part*")) <= 4096
        assert (bundle / gpu_kit.MANIFEST).is_file()
    joined = gpu_kit.join_wheels(tmp_path / "kit", tmp_path / "joined")
    assert [p.read_bytes() for p in joined] == [p.read_bytes() for p in files]


def test_a_missing_bundle_is_named_and_a_damaged_piece_refused(tmp_path):
    files = wheels(tmp_path, [3000, 3000])
    kit = tmp_path / "kit"
    gpu_kit.write_bundles(files, kit, bundle_bytes=2000)
    hidden = kit / "bundle-2"
    hidden.rename(tmp_path / "elsewhere")
    with pytest.raises(SystemExit, match="lacks bundle-2: bring every bundle"):
        gpu_kit.join_wheels(kit, tmp_path / "joined")
    (tmp_path / "elsewhere").rename(hidden)
    piece = next(hidden.glob("*.part*"))
    piece.write_bytes(bytes([piece.read_bytes()[0] ^ 1]) + piece.read_bytes()[1:])
    with pytest.raises(SystemExit, match="SHA-256 differs"):
        gpu_kit.join_wheels(kit, tmp_path / "joined")
    with pytest.raises(SystemExit, match="no bundle under"):
        gpu_kit.join_wheels(tmp_path / "empty", tmp_path / "joined")


def test_a_wheel_built_here_installs_from_its_bundles_and_imports(tmp_path):
    project = tmp_path / "project"
    (project / "kit_probe").mkdir(parents=True)
    (project / "kit_probe" / "__init__.py").write_text("ANSWER = 42\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "kit-probe"\nversion = "1.0"\n'
    )
    built = tmp_path / "built"
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip_wheel, "-w", str(built), str(project)], check=True)
    [wheel] = built.glob("*.whl")
    bundles = gpu_kit.write_bundles([wheel], tmp_path / "kit", bundle_bytes=wheel.stat().st_size // 2 + 1)
    assert len(bundles) == 2
    gpu_kit.install(tmp_path / "kit", tmp_path / "site", project=None)
    probe = [sys.executable, "-c", "import kit_probe; print(kit_probe.ANSWER)"]
    site = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run(probe, env=site, capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "42", done.stderr


def test_the_lock_pins_every_package_the_kit_names() -> None:
    pins = gpu_kit.lock_pins()
    assert set(gpu_kit.ROOTS) | set(gpu_kit.UNRESOLVED) <= pins.keys()
    assert pins["torch"].startswith("2.") and pins["mujoco-warp"]


def test_a_wheel_file_name_gives_its_normalised_name_and_version() -> None:
    name = "mujoco_warp-4.0.0-py3-none-any.whl"
    assert gpu_kit.wheel_pin(name) == ("mujoco-warp", "4.0.0")
    assert gpu_kit.normalise("Farama_Notifications") == "farama-notifications"


def test_a_folder_tree_travels_in_the_bundles_and_is_unpacked_beside_the_wheels(tmp_path):
    source = tmp_path / "source"
    (source / "tree_probe" / "assets" / "empty").mkdir(parents=True)
    (source / "tree_probe" / "__init__.py").write_text(
        "from pathlib import Path\nDATA = (Path(__file__).parent / 'data.txt').read_text()\n"
    )
    (source / "tree_probe" / "data.txt").write_text("carried")
    (source / "tree_probe" / "left_behind.bin").write_bytes(os.urandom(64))
    members = ["tree_probe/__init__.py", "tree_probe/data.txt", "tree_probe/assets/empty"]
    tree = gpu_kit_libero.write_tree(source, members, tmp_path / ("probe" + gpu_kit.TREE_SUFFIX))
    gpu_kit.write_bundles([tree], tmp_path / "kit", bundle_bytes=tree.stat().st_size // 3 + 1)
    gpu_kit.install(tmp_path / "kit", tmp_path / "site", project=None)
    unpacked = tmp_path / "site" / "tree_probe"
    assert sorted(p.name for p in unpacked.iterdir()) == ["__init__.py", "assets", "data.txt"]
    assert (unpacked / "assets" / "empty").is_dir()
    probe = [sys.executable, "-c", "import tree_probe; print(tree_probe.DATA)"]
    site = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run(probe, env=site, capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "carried", done.stderr
