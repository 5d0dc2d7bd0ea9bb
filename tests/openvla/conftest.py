"""The OpenVLA tests: a stand-in folder written once per session (see ``standin_folder.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from standin_folder import write_standin_folder


@pytest.fixture(scope="session")
def standin_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_standin_folder(tmp_path_factory.mktemp("openvla") / "standin")
