"""The SFT starts kept in ``benchmarks/starts`` still load through their family's loading code."""

import json
from pathlib import Path

import pytest

from vla_rl.policies.flow.pi0_io import CONFIG_FILE as PI0_CONFIG_FILE
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.policies.vla.vla_io import POLICY_CONFIG_FILE as VLA_CONFIG_FILE

STARTS = Path(__file__).resolve().parents[2] / "benchmarks" / "starts"
FOLDERS = sorted(path for path in STARTS.iterdir() if path.is_dir())
FAMILIES = ("token_vla", "chunk_vla", "pi0", "flow_mlp")
"""A start folder's name begins with its family's."""
CONFIG_FILES = {"token_vla": VLA_CONFIG_FILE, "pi0": PI0_CONFIG_FILE}
"""Family -> the file its saved policy keeps its settings in."""


def test_there_are_committed_starts():
    assert FOLDERS, f"no start folders under {STARTS}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda path: path.name)
def test_a_committed_start_loads_with_its_training_settings(folder):
    family = next(name for name in FAMILIES if folder.name.startswith(name))
    policy = load_chunk_policy(family, folder)
    saved = json.loads((folder / CONFIG_FILES[family]).read_text())
    settings = saved.get("config", saved)  # the token VLA nests its settings under "config"
    assert policy.action_dim == settings["action_dim"]
    assert sum(p.numel() for p in policy.parameters()) > 0
