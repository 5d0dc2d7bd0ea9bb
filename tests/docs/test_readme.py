"""The README stays a short front door, and no relative link of the README, the docs or the run logs
points at a file that is not there (the site build checks the docs' links again with ``--strict``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_README_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_link_targets(markdown: str) -> list[str]:
    """Targets of Markdown links and images that point into the repository (no scheme, no anchor-only)."""
    targets = []
    for target in LINK.findall(markdown):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_relative_link_targets_skip_urls_and_anchors() -> None:
    text = "[a](docs/x.md#part) ![b](img.png) [c](https://example.org/y.md) [d](#top) [e](mailto:x@y)"
    assert relative_link_targets(text) == ["docs/x.md", "img.png"]


def test_readme_is_under_250_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < MAX_README_LINES, f"README.md has {lines} lines; move details to docs/"


MARKDOWN_FILES = [
    README,
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "benchmarks" / "results").glob("*.md")),
]


def repository_file(target: Path) -> Path:
    """Where a linked file lives in the repository. The site build (``docs/hooks.py``) serves
    ``benchmarks/results/`` as ``docs/results/`` and writes ``docs/reference/config.md`` itself."""
    target = target.resolve()
    site_results = ROOT / "docs" / "results"
    if target.is_relative_to(site_results):
        return ROOT / "benchmarks" / "results" / target.relative_to(site_results)
    if target == ROOT / "docs" / "reference" / "config.md":
        return ROOT / "docs" / "gen_config_reference.py"
    return target


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_that_exist(path: Path) -> None:
    targets = relative_link_targets(path.read_text())
    results = ROOT / "benchmarks" / "results"
    # the site serves benchmarks/results/ as docs/results/: its pages link from there
    base = ROOT / "docs" / "results" if path.parent == results else path.parent
    missing = [t for t in targets if not repository_file(base / t).exists()]
    assert missing == [], f"{path.relative_to(ROOT)} links to missing files"
