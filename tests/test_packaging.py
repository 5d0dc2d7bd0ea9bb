"""The repository's top-level folders install under the single ``vla_rl`` namespace."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {
    "vla_rl": "vla_rl",
    "vla_rl.sims": "sims",
    "vla_rl.robots": "robots",
    "vla_rl.configs": "configs",
    "vla_rl.real_world": "real_world",
}


def _setuptools_table() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_package_dir_mapping_matches_layout() -> None:
    assert _setuptools_table()["package-dir"] == PACKAGE_DIRS


def test_every_python_package_is_listed() -> None:
    listed = set(_setuptools_table()["packages"])
    on_disk = set()
    for package, folder in PACKAGE_DIRS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            on_disk.add(".".join([package, *relative.parts]))
    assert on_disk - listed == set(), f"add these to pyproject.toml packages: {sorted(on_disk - listed)}"
    assert listed - on_disk == set(), f"listed but missing on disk: {sorted(listed - on_disk)}"


def test_namespaced_imports_resolve_to_repository_folders() -> None:
    for package, folder in PACKAGE_DIRS.items():
        module = importlib.import_module(package)
        assert Path(module.__file__).parent == ROOT / folder


def test_no_generic_top_level_modules_installed(tmp_path: Path) -> None:
    # A fresh interpreter outside the checkout sees only what the installation provides.
    probe = "import importlib.util, sys; print([m for m in sys.argv[1:] if importlib.util.find_spec(m)])"
    generic = ["sims", "robots", "configs", "real_world"]
    out = subprocess.run(
        [sys.executable, "-c", probe, *generic], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]", f"generic top-level modules are importable: {out}"
