"""The size of the library: Python lines (``wc -l``: blank lines and comments included) of
``vla_rl/``, ``sims/``, ``robots/`` and ``real_world/``, tests excluded, per top-level package, at
the working tree and at a git revision beside it (default: the commit the one-core redesign
started from, whose count was 27,436).

    python -m benchmarks.line_count [--base REV] [--at REV]
"""

from __future__ import annotations

import argparse
import subprocess
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("vla_rl", "sims", "robots", "real_world")
REDESIGN_BASE = "25066a4"
"""The last commit before the one-core redesign (issue 83)."""


def counted(path: str) -> bool:
    return path.endswith(".py") and "/tests/" not in path and path.split("/")[0] in PACKAGES


def package_of(path: str) -> str:
    """``vla_rl/<sub>`` for the library's own subpackages, else the top-level folder."""
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] == "vla_rl" and len(parts) > 2 else parts[0]


def tree_counts() -> Counter[str]:
    files = subprocess.run(
        ["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True, text=True, check=True
    )
    counts: Counter[str] = Counter()
    for path in filter(counted, files.stdout.split()):
        counts[package_of(path)] += len((ROOT / path).read_bytes().splitlines())
    return counts


def revision_counts(revision: str) -> Counter[str]:
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", revision, *PACKAGES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    counts: Counter[str] = Counter()
    for path in filter(counted, listing.stdout.split()):
        text = subprocess.run(
            ["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        counts[package_of(path)] += len(text.splitlines())
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default=REDESIGN_BASE, help="the git revision to compare with")
    parser.add_argument("--at", default=None, help="the git revision to count (default: the working tree)")
    args = parser.parse_args()
    now = tree_counts() if args.at is None else revision_counts(args.at)
    base = revision_counts(args.base)
    print(f"| package | {args.base} | {args.at or 'now'} | change |")
    print("|---|---:|---:|---:|")
    for package in sorted(set(now) | set(base)):
        print(f"| `{package}` | {base[package]:,} | {now[package]:,} | {now[package] - base[package]:+,} |")
    total_now, total_base = sum(now.values()), sum(base.values())
    print(f"| **total** | {total_base:,} | {total_now:,} | {total_now - total_base:+,} |")


if __name__ == "__main__":
    main()
