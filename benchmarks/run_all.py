"""Run every benchmark in turn (``make bench``); each prints its own summary.

The learning benchmark takes about 1.5 hours on a 2-core machine; ``--quick`` skips it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

BENCHMARKS = {
    "throughput": ["-m", "benchmarks.throughput"],
    "render": ["-m", "benchmarks.render_speed"],
    "vla_inference": ["-m", "benchmarks.vla_inference"],
    "flow_inference": ["-m", "benchmarks.flow_inference"],
    "learning": ["-m", "benchmarks.learning"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the long learning benchmark")
    args = parser.parse_args()
    failed = []
    for name, argv in BENCHMARKS.items():
        if args.quick and name == "learning":
            continue
        print(f"== {name}", flush=True)
        if subprocess.run([sys.executable, *argv]).returncode != 0:
            failed.append(name)
    if failed:
        sys.exit(f"benchmarks that exited with an error: {', '.join(failed)}")


if __name__ == "__main__":
    main()
