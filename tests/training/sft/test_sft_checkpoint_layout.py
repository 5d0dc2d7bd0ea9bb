"""SFT checkpoints keep the policy as a ``save_pretrained`` folder written atomically with the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from vla_rl.training.checkpoint import (
    list_checkpoints,
    load_checkpoint,
    resolve_checkpoint_dir,
    save_checkpoint,
)
from vla_rl.training.sft.config import SFTConfig


def _write_policy(directory: Path) -> None:
    (directory / "policy").mkdir()
    (directory / "policy" / "weights.bin").write_bytes(b"\x01\x02")


def test_checkpoint_without_state_dict_resolves_and_loads(tmp_path: Path) -> None:
    path = save_checkpoint(tmp_path, 5, None, {"step": 5}, SFTConfig(steps=9), write_extra=_write_policy)
    assert sorted(p.name for p in path.iterdir()) == [
        "config.yaml",
        "policy",
        "trainer_state.json",
        "trainer_state.safetensors",
    ]
    assert (path / "policy" / "weights.bin").read_bytes() == b"\x01\x02"
    assert resolve_checkpoint_dir(tmp_path) == path
    loaded = load_checkpoint(tmp_path)
    assert loaded.iteration == 5 and loaded.policy_state == {} and loaded.trainer_state == {"step": 5}
    assert "steps: 9" in loaded.config_path.read_text()


def test_failing_extra_writer_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, 1, None, {"step": 1}, SFTConfig(), write_extra=_write_policy)

    def broken(directory: Path) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 2, None, {"step": 2}, SFTConfig(), write_extra=broken)
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["iter_000001"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["iter_000001", "latest"]
    assert load_checkpoint(tmp_path).iteration == 1
