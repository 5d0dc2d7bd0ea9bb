"""``benchmarks.metaworld_protocol``: its env and table checked by hand anywhere, and a shortened run
of MetaWorld's experts on real MetaWorld (``make test-metaworld``; a check of the machinery, not a
result)."""

from __future__ import annotations

import json

import pytest

from benchmarks import metaworld_protocol
from benchmarks.metaworld_protocol import ProtocolResult, markdown_table, protocol_env_config
from vla_rl.envs.registry import backend_unavailable_reason


def test_protocol_env_is_metaworlds_settings():
    cfg = protocol_env_config()
    assert cfg.task == "MT10" and cfg.num_envs == 10 and cfg.max_episode_steps == 500 and not cfg.cameras
    assert cfg.options == {"variations": "benchmark", "terminate_on_success": True, "benchmark_seed": 0}
    assert protocol_env_config("reach-v3+push-v3", worlds_per_task=3).num_envs == 6


def test_table_has_every_task_and_their_mean():
    result = ProtocolResult(
        task="reach-v3+push-v3",
        benchmark="MT10",
        benchmark_seed=0,
        policy="experts",
        success_by_task={"reach-v3": 1.0, "push-v3": 0.5},
        episodes_per_task=50,
        max_episode_steps=500,
        worlds_per_task=1,
        episode_env_steps=12_345,
        env_steps=20_000,
        wall_time_s=61.0,
        machine="a machine",
    )
    table = markdown_table(result)
    # (100 + 50) / 2 = 75.0
    assert table.splitlines()[:5] == [
        "| task | success |",
        "|---|---:|",
        "| reach-v3 | 100.0 % |",
        "| push-v3 | 50.0 % |",
        "| **mean** | **75.0 %** |",
    ]
    assert "100 episodes in 12,345 env steps (20,000 stepped" in table and "Machine: a machine" in table


reason = backend_unavailable_reason("metaworld")


@pytest.mark.skipif(reason is not None, reason=f"metaworld: {reason}")
def test_experts_run_a_shortened_protocol(tmp_path, monkeypatch):
    monkeypatch.setattr(metaworld_protocol, "RESULTS_DIR", tmp_path)
    argv = ["--tasks", "reach-v3+drawer-close-v3", "--episodes-per-task", "2", "--max-episode-steps", "80"]
    result = metaworld_protocol.main([*argv, "--worlds-per-task", "2", "--results-name", "short"])
    assert result.benchmark == "MT10" and list(result.success_by_task) == ["reach-v3", "drawer-close-v3"]
    assert result.success_by_task["reach-v3"] == 1.0, "the reach expert reaches every goal within 80 steps"
    assert result.success_by_task["drawer-close-v3"] in (0.0, 0.5, 1.0)
    # 4 worlds, one episode each; those that finish early wait, still stepped, for the slowest one.
    assert 0 < result.episode_env_steps <= result.env_steps <= 4 * 80 and result.env_steps % 4 == 0
    saved = json.loads((tmp_path / "short.json").read_text())
    assert saved["success_by_task"] == result.success_by_task and saved["mean_success"] == result.mean_success
    assert (tmp_path / "short.md").read_text() == markdown_table(result)


@pytest.mark.skipif(reason is not None, reason=f"metaworld: {reason}")
def test_a_saved_chunk_policy_runs_the_protocol(tmp_path, monkeypatch):
    import torch

    from vla_rl.policies.registry import build_chunk_policy

    monkeypatch.setattr(metaworld_protocol, "RESULTS_DIR", tmp_path)
    torch.manual_seed(0)
    policy = build_chunk_policy(
        "gaussian", chunk_len=2, action_dim=4, proprio_dim=4, policy={"hidden_sizes": [8]}
    )
    policy.save_pretrained(tmp_path / "policy")
    argv = ["--tasks", "reach-v3", "--episodes-per-task", "2", "--max-episode-steps", "5"]
    result = metaworld_protocol.main([*argv, "--policy", str(tmp_path / "policy"), "--family", "gaussian"])
    assert result.benchmark == "MT1:reach-v3" and result.policy.startswith("gaussian policy")
    assert result.success_by_task == {"reach-v3": 0.0}, "5 steps of at most 1 cm: no goal is that near"
    assert result.episode_env_steps == result.env_steps == 10


def test_a_policy_needs_its_family():
    with pytest.raises(SystemExit):
        metaworld_protocol.main(["--policy", "somewhere"])
