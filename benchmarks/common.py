"""Small helpers shared by the benchmarks: timing medians, a machine description, results files."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

RESULTS_DIR = Path(__file__).parent / "results"


def run_logged(command: list[str], log: Path, env: dict[str, str] | None = None) -> float:
    """Run ``command`` with its output to ``log``; seconds of wall clock. Exits naming ``log`` on failure."""
    start = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, check=False).returncode
    if code != 0:
        raise SystemExit(f"{' '.join(command)} failed ({code}); see {log}")
    return time.perf_counter() - start


def add_results_name(parser: argparse.ArgumentParser, default: str) -> None:
    """``--results-name``: the stem of the JSON and plot a benchmark (re)writes under ``RESULTS_DIR``."""
    parser.add_argument(
        "--results-name",
        default=default,
        help="results file stem under benchmarks/results (another name keeps a probe, or a start "
        "made for another benchmark, apart from the table)",
    )


def results_files(results_name: str) -> tuple[Path, Path]:
    """The JSON table and the plot a benchmark writes for ``results_name``."""
    return RESULTS_DIR / f"{results_name}.json", RESULTS_DIR / f"{results_name}.png"


def write_report(results_dir: Path, results_name: str, report: dict, markdown: str) -> None:
    """``<results_name>.json`` (``report``) and ``<results_name>_table.md`` (``markdown``) under
    ``results_dir``, which is created if missing."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"{results_name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (results_dir / f"{results_name}_table.md").write_text(markdown)


def cpu_description(cpuinfo: str | None = None) -> str:
    """The CPU's model name and its widest vector extension, e.g. ``AMD EPYC, avx2``.

    Hosts of one machine kind differ in CPU, and the same pi0 update took from 2.4 s to 7.0 s on
    different hosts (benchmarks/results/rl_pick_place_runs.md), so wall-clock figures name the CPU
    they were measured on. ``cpuinfo`` is the text of ``/proc/cpuinfo`` (read when None); without it
    the architecture alone is returned.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields = dict(
        (key.strip(), value.strip())
        for key, _, value in (line.partition(":") for line in cpuinfo.splitlines())
        if value
    )
    model = fields.get("model name")
    if not model:
        return platform.machine()
    flags = set(fields.get("flags", "").split())
    vector = next((name for name in ("avx512f", "avx2", "avx") if name in flags), None)
    return f"{model}, {vector}" if vector else model


def machine_line() -> str:
    import torch

    cpu = cpu_description()
    return (
        f"{date.today().isoformat()}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()} kernels)"
        + (f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "")
    )


def median_rate(run_once: Callable[[], int], repeats: int) -> tuple[float, list[float]]:
    """Call ``run_once`` (which returns the number of items it processed) ``repeats`` times and
    return the median items/s and all rates."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        items = run_once()
        rates.append(items / (time.perf_counter() - start))
    return statistics.median(rates), rates


def random_action_steps_per_s(env, steps: int, repeats: int, warmup_steps: int = 1) -> float:
    """Median env-steps/s of ``env.step`` (env already reset) over ``repeats`` runs of ``steps``
    uniformly random actions in [-1, 1] (torch seed 0), after ``warmup_steps`` untimed steps."""
    import torch

    generator = torch.Generator().manual_seed(0)
    actions = torch.rand((steps, env.num_envs, env.action_dim), generator=generator) * 2 - 1
    for action in actions[:warmup_steps]:
        env.step(action)

    def run_once() -> int:
        for action in actions:
            env.step(action)
        return steps * env.num_envs

    return median_rate(run_once, repeats)[0]


NAMESPACE_FLAG = "--in-namespace"
"""Set on the re-run inside the private network namespace (see ``rerun_in_private_namespace``)."""


def rerun_in_private_namespace(module: str) -> None:
    """Run ``python -m module`` with this process's arguments again inside a private network
    namespace (``unshare -n``, ``lo`` up) and exit with its status, so ROS and DDS traffic stays
    there; returns at once inside it, or where no namespace can be made."""
    import shlex
    import shutil
    import subprocess
    import sys

    if NAMESPACE_FLAG in sys.argv or shutil.which("unshare") is None:
        return
    args = " ".join(shlex.quote(a) for a in sys.argv[1:])
    command = f"ip link set lo up && exec {shlex.quote(sys.executable)} -m {module} {NAMESPACE_FLAG} {args}"
    sys.exit(subprocess.call(["unshare", "-n", "sh", "-c", command]))


def lerobot_env(home: Path) -> dict[str, str]:
    """The environment of a process in LeRobot's venv: offline, its caches under ``home``, nothing
    of this process's ``PYTHONPATH`` or user site."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(home),
        "HF_LEROBOT_HOME": str(home / "lerobot"),
        "PYTHONNOUSERSITE": "1",
    }
    env.pop("PYTHONPATH", None)
    return env
