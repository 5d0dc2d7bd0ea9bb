"""Checkpoint round trip, atomic writes, ``latest`` and pruning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import vla_rl.training.checkpoint as checkpoint_module
from vla_rl.config.schema import TrainConfig
from vla_rl.training.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    resolve_checkpoint_dir,
    save_checkpoint,
)
from vla_rl.training.seeding import rng_state, set_rng_state


def _policy_and_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for _ in range(3):
        optimizer.zero_grad()
        policy(torch.randn(5, 3)).square().sum().backward()
        optimizer.step()
    return policy, optimizer


def _save(run_dir: Path, iteration: int, keep: int = 0) -> Path:
    policy, optimizer = _policy_and_optimizer()
    state = {"iteration": iteration, "optimizer": optimizer.state_dict(), "rng": rng_state()}
    return save_checkpoint(run_dir, iteration, policy.state_dict(), state, TrainConfig(), keep=keep)


def test_round_trip_restores_policy_optimizer_and_rng(tmp_path: Path) -> None:
    policy, optimizer = _policy_and_optimizer()
    torch.manual_seed(5)
    np.random.seed(5)
    state = {"optimizer": optimizer.state_dict(), "rng": rng_state(), "env": {"qpos": np.ones((2, 3))}}
    expected_draws = (torch.rand(3), np.random.rand(3))
    path = save_checkpoint(tmp_path, 7, policy.state_dict(), state, TrainConfig(seed=3))
    assert path == tmp_path / "checkpoints" / "iter_000007"
    assert sorted(p.name for p in path.iterdir()) == [
        "config.yaml",
        "policy.safetensors",
        "trainer_state.json",
        "trainer_state.safetensors",
    ]

    loaded = load_checkpoint(tmp_path)
    assert loaded.iteration == 7 and loaded.path == path
    for key, value in policy.state_dict().items():
        assert torch.equal(loaded.policy_state[key], value)
    fresh_policy, fresh_optimizer = _policy_and_optimizer()
    fresh_optimizer.load_state_dict(loaded.trainer_state["optimizer"])
    for group, expected in zip(
        fresh_optimizer.state_dict()["param_groups"], optimizer.state_dict()["param_groups"], strict=True
    ):
        assert group == expected
    for slot, expected in optimizer.state_dict()["state"].items():
        for name, tensor in expected.items():
            assert torch.equal(fresh_optimizer.state_dict()["state"][slot][name], tensor)
    set_rng_state(loaded.trainer_state["rng"])
    assert torch.equal(torch.rand(3), expected_draws[0])
    assert np.array_equal(np.random.rand(3), expected_draws[1])
    assert np.array_equal(loaded.trainer_state["env"]["qpos"], np.ones((2, 3)))
    assert "seed: 3" in (path / "config.yaml").read_text()


def test_no_pickle_files(tmp_path: Path) -> None:
    path = _save(tmp_path, 1)
    for file in path.iterdir():
        assert file.suffix in (".safetensors", ".json", ".yaml")
        assert not file.read_bytes().startswith(b"\x80")  # pickle protocol marker


def test_latest_and_resolution(tmp_path: Path) -> None:
    _save(tmp_path, 1)
    second = _save(tmp_path, 2)
    assert (tmp_path / "checkpoints" / "latest").read_text().strip() == "iter_000002"
    assert latest_checkpoint(tmp_path / "checkpoints") == second
    assert resolve_checkpoint_dir(tmp_path) == second
    assert resolve_checkpoint_dir(tmp_path / "checkpoints") == second
    assert resolve_checkpoint_dir(tmp_path / "checkpoints" / "iter_000001").name == "iter_000001"
    with pytest.raises(FileNotFoundError):
        resolve_checkpoint_dir(tmp_path / "nothing")


def test_rewriting_the_same_iteration_replaces_it(tmp_path: Path) -> None:
    _save(tmp_path, 4)
    _save(tmp_path, 4)
    assert [p.name for p in (tmp_path / "checkpoints").iterdir() if p.name != "latest"] == ["iter_000004"]
    assert load_checkpoint(tmp_path).iteration == 4


def test_failure_mid_write_keeps_previous_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _save(tmp_path, 1)
    real_save_file = checkpoint_module.save_file
    calls = []

    def failing_save_file(tensors: dict, filename: str) -> None:
        calls.append(filename)
        if len(calls) == 2:  # the policy file is written, the trainer state is not
            raise OSError("disk full")
        real_save_file(tensors, filename)

    monkeypatch.setattr(checkpoint_module, "save_file", failing_save_file)
    with pytest.raises(OSError, match="disk full"):
        _save(tmp_path, 2)
    monkeypatch.undo()
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == ["iter_000001", "latest"]
    assert load_checkpoint(tmp_path).iteration == 1
    assert len(calls) == 2


def test_pruning_keeps_the_newest(tmp_path: Path) -> None:
    for iteration in range(1, 6):
        _save(tmp_path, iteration, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["iter_000004", "iter_000005"]
    assert load_checkpoint(tmp_path).iteration == 5


def test_keep_zero_keeps_all(tmp_path: Path) -> None:
    for iteration in range(1, 4):
        _save(tmp_path, iteration, keep=0)
    assert len(list_checkpoints(tmp_path / "checkpoints")) == 3
