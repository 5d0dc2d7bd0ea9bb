"""Time the quick start's training command (`make train`) on a fresh clone.

Clones the current commit into a temporary directory, runs ``make train`` there (which creates
the virtual environment, installs the package and trains the default job) and reports the wall
time and the success rate the command printed. This is what a new user experiences.

    python -m benchmarks.fresh_clone_train [--keep]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine_line

REPO_ROOT = Path(__file__).resolve().parents[1]
SUCCESS_PATTERN = re.compile(r"success rate[^0-9]*([0-9.]+)\s*%", re.IGNORECASE)


def run(keep: bool, make_args: str) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="vla_rl_fresh_"))
    clone = workdir / "vla-rl"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    command = ["make", "train"] + ([f"ARGS={make_args}"] if make_args else [])
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=clone, env=env, capture_output=True, text=True)
    wall_s = time.perf_counter() - start
    output = proc.stdout + proc.stderr
    (workdir / "make_train.log").write_text(output)
    matches = SUCCESS_PATTERN.findall(output)
    success = float(matches[-1]) if matches else float("nan")
    print(f"machine: {machine_line()}")
    print(
        f"fresh clone `make train`: exit {proc.returncode}, wall {wall_s / 60:.2f} min, "
        f"final success rate {success:.1f} %  (log: {workdir / 'make_train.log'})"
    )
    passed = proc.returncode == 0 and wall_s < 600 and success >= 95
    print(f"target: < 10 min and >= 95 % -> {'PASS' if passed else 'FAIL'}")
    if not keep:
        shutil.rmtree(clone, ignore_errors=True)
    return proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary clone")
    parser.add_argument("--make-args", default="", help="extra ARGS passed to `make train`")
    args = parser.parse_args()
    sys.exit(run(args.keep, args.make_args))


if __name__ == "__main__":
    main()
