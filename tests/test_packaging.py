"""The repository's top-level folders install under the single ``vla_rl`` namespace."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

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
    """Every folder under the mapped ones: the packages (with ``__init__.py``) and the folders of data
    only (setuptools installs those as packages too, and warns about each one left out)."""
    listed = set(_setuptools_table()["packages"])
    on_disk = set()
    for package, folder in PACKAGE_DIRS.items():
        for directory in [ROOT / folder, *(ROOT / folder).rglob("*")]:
            if directory.is_dir() and directory.name != "__pycache__":
                relative = directory.relative_to(ROOT / folder)
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


# ----- the locks in constraints/ (Makefile: every venv installs from one; `make lock` writes them) ---------

LOCK_OF_EXTRAS = {
    "EXTRAS": ROOT / "constraints" / "main.txt",
    "MW_EXTRAS": ROOT / "constraints" / "metaworld.txt",
}
"""The Makefile variable naming a venv's extras -> the lock that venv installs from."""


def _lock_pins(lock: Path) -> dict[str, Version]:
    """Canonical name -> the version the lock pins."""
    pins = {}
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        (specifier,) = requirement.specifier
        assert specifier.operator == "==", f"{lock.name}: {line!r} is not a pin"
        pins[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pins


def _makefile_extras(variable: str) -> list[str]:
    (line,) = [x for x in (ROOT / "Makefile").read_text().splitlines() if x.startswith(f"{variable} :=")]
    return line.split(":=", 1)[1].strip().split(",")


def _running_lock() -> Path:
    """The lock the running venv was built from: the MetaWorld venv's, or the main one."""
    try:
        metadata.distribution("metaworld")
    except metadata.PackageNotFoundError:
        return LOCK_OF_EXTRAS["EXTRAS"]
    return LOCK_OF_EXTRAS["MW_EXTRAS"]


def test_each_lock_pins_every_requirement_of_its_venv_within_pyproject_bounds() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for variable, lock in LOCK_OF_EXTRAS.items():
        wanted = [Requirement(text) for text in project["dependencies"]]
        for extra in _makefile_extras(variable):
            wanted += [Requirement(text) for text in project["optional-dependencies"][extra]]
        pins = _lock_pins(lock)
        missing = sorted({canonicalize_name(r.name) for r in wanted} - set(pins))
        assert missing == [], f"{lock.name} lacks {missing}: run `make lock`"
        outside = [str(r) for r in wanted if not r.specifier.contains(pins[canonicalize_name(r.name)], True)]
        assert outside == [], f"{lock.name} pins versions outside {outside}: run `make lock`"


def test_locks_pin_the_cpu_build_of_torch() -> None:
    for lock in LOCK_OF_EXTRAS.values():
        assert _lock_pins(lock)["torch"].local == "cpu", f"{lock.name} must pin torch's CPU build"


def test_installed_distributions_are_the_pinned_versions() -> None:
    """The running venv holds exactly the versions its lock names (`make venv` installs with ``-c``).

    torch may be another build (local label, e.g. ``+cu130``) of the pinned version: ``TORCH_SPEC``
    picks the build, the lock the version."""
    lock = _running_lock()
    wrong = []
    for name, pinned in _lock_pins(lock).items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} (pinned {pinned}) is not installed")
            continue
        same = installed.public == pinned.public if name == "torch" else installed == pinned
        if not same:
            wrong.append(f"{name} {installed} installed, {pinned} pinned")
    assert wrong == [], f"the venv differs from {lock.relative_to(ROOT)} (`make venv` reinstalls): {wrong}"


def test_every_installed_distribution_is_in_the_lock() -> None:
    """Nothing unpinned: each distribution of the venv but the project itself is one the lock names."""
    lock = _running_lock()
    pinned = set(_lock_pins(lock))
    # Only the venv's own distributions: importing ROS 1 adds the system's dist-packages to sys.path.
    venv = Path(sys.prefix).resolve()
    installed = {
        canonicalize_name(d.metadata["Name"])
        for d in metadata.distributions()
        if Path(str(d.locate_file(""))).resolve().is_relative_to(venv)
    }
    unpinned = sorted(installed - pinned - {"vla-rl"})
    assert unpinned == [], f"installed but not in {lock.relative_to(ROOT)}: {unpinned}"
