"""``make docs`` (part of ``make test``) builds the site strictly, so a broken link fails the suite.

mkdocs counts the warnings that ``--strict`` turns into a failure only at the log level it prints:
with ``--quiet`` (or ``-q``) a broken link is dropped unseen and the build exits 0."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def recipe_lines(makefile: str, target: str) -> list[str]:
    """The command lines (tab-indented) of ``target``'s recipe."""
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)*)", makefile, flags=re.M)
    assert match, f"no {target!r} target"
    return [line.strip() for line in match.group(1).splitlines()]


def test_recipe_lines_reads_only_the_target_s_commands() -> None:
    text = "a: b\n\techo 1\n\techo 2\nc:\n\techo 3\n"
    assert recipe_lines(text, "a") == ["echo 1", "echo 2"]
    assert recipe_lines(text, "c") == ["echo 3"]


def test_make_docs_builds_strictly_and_prints_the_warnings_strict_counts() -> None:
    builds = [shlex.split(line) for line in recipe_lines((ROOT / "Makefile").read_text(), "docs")]
    builds = [argv for argv in builds if "build" in argv and any(a.endswith("mkdocs") for a in argv)]
    assert len(builds) == 1, "make docs runs one mkdocs build"
    argv = builds[0]
    assert "--strict" in argv
    assert "--quiet" not in argv and "-q" not in argv
