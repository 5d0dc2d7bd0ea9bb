"""The committed RL recipes (``configs/recipe/``) explain themselves: a header saying what the recipe
is, a comment for every setting saying what it does, a budget in updates with a wall-clock cap beside
it, and run history cited from ``benchmarks/results/`` (never the README, which holds no run logs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPE_DIR = ROOT / "configs" / "recipe"
RECIPES = sorted(RECIPE_DIR.glob("*.yaml"))
ALL_FILES = [*RECIPES, *sorted((RECIPE_DIR / "parts").glob("*.yaml"))]
SETTING = re.compile(r"^\s*[a-z_]+:\s*[^\s#]")
"""A line that sets a value (``key: value``), not one that opens a section (``algorithm:``)."""
CITED_PATH = re.compile(r"benchmarks/results/[\w.-]+\.md|parts/[\w.-]+\.yaml")


def uncommented_settings(text: str) -> list[str]:
    """Settings with neither a comment on their line nor a comment block above the run of settings
    they belong to (a block covers the lines after it up to a blank line, a section or a setting
    that carries its own comment)."""
    missing, covered = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            covered = True
        elif SETTING.match(line):
            if "#" in line:
                covered = False
            elif not covered:
                missing.append(stripped)
        else:  # a blank line, a section header or a list item ends what a comment block covers
            covered = False
    return missing


def test_uncommented_settings_reads_inline_comments_and_comment_blocks() -> None:
    text = (
        "# header\n"
        "algorithm:\n"
        "  a: 1   # what a does\n"
        "  b: 2\n"
        "  # what c and d do\n"
        "  c: 3\n"
        "  d: 4\n"
        "  e: 5   # what e does\n"
        "  f: 6\n"
        "env:\n"
        "  g: 7\n"
    )
    assert uncommented_settings(text) == ["b: 2", "f: 6", "g: 7"]


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(RECIPE_DIR)))
def test_every_setting_says_what_it_does(path: Path) -> None:
    text = path.read_text()
    header = [line for line in text.splitlines()[:3] if line.startswith("#") and "@package" not in line]
    assert header, f"{path.name} has no header comment saying what it is"
    assert uncommented_settings(text) == []


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: str(p.relative_to(RECIPE_DIR)))
def test_history_is_cited_from_files_that_exist(path: Path) -> None:
    text = path.read_text()
    assert "README" not in text, "run history lives in benchmarks/results/, not the README"
    for cited in CITED_PATH.findall(text):
        base = ROOT if cited.startswith("benchmarks/") else RECIPE_DIR
        assert (base / cited).is_file(), f"{path.name} cites {cited}, which is not there"


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_each_recipe_states_its_budget_in_updates_and_a_cap(path: Path) -> None:
    values = yaml.safe_load(path.read_text())
    assert isinstance(values["iterations"], int) and values["iterations"] > 0
    assert values["max_minutes"] == 90
    assert "benchmarks/results/recipe_history.md" in path.read_text()
