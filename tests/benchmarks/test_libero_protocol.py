"""``benchmarks.libero_protocol`` on a real LIBERO task (`make test-libero`, in `.venv-libero`),
shortened to a few steps and episodes (a check of the machinery, not a result), and its tables
checked by hand in any environment."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from benchmarks.libero_protocol import SuiteResult, evaluate_suite, markdown_tables, protocol_env_config
from vla_rl.policies.registry import build_chunk_policy


def test_protocol_env_is_the_fields_settings():
    cfg = protocol_env_config("libero_goal", worlds_per_task=2)
    assert cfg.num_envs == 20 and cfg.max_episode_steps == 0 and cfg.image_size == 256
    assert cfg.cameras == ["agentview", "robot0_eye_in_hand"]
    assert cfg.options == {
        "init_states": "protocol",
        "image_orientation": "rotate180",
        "warmup_steps": 10,
        "workers": 1,
    }
    assert protocol_env_config("libero_10/4").num_envs == 1
    assert protocol_env_config("libero_object/2+3", 10, workers=16).options["workers"] == 16


def test_tables_in_the_fields_layout():
    results = [
        SuiteResult("libero_spatial", {"a": 0.5, "b": 1.0}, 50),
        SuiteResult("libero_goal/3", {"c": 0.25}, 4),
    ]
    tables = markdown_tables(results)
    # Spatial: (50 + 100) / 2 = 75.0; Goal: 25.0; average of the suites: 50.0
    assert tables.splitlines()[:3] == [
        "| Spatial | Goal | Average |",
        "|---:|---:|---:|",
        "| 75.0 | 25.0 | 50.0 |",
    ]
    assert "**Goal** (`libero_goal/3`, 4 episodes per task)" in tables
    assert "| c | 25.0 % |" in tables


@pytest.mark.skipif(
    importlib.util.find_spec("libero") is None,
    reason="LIBERO is not installed here; `make test-libero` runs this test in .venv-libero",
)
def test_a_policy_runs_the_protocol_on_a_real_task(tmp_path, monkeypatch):
    from vla_rl.sims.libero.tasks import libero_package_dir, resolve_assets_dir, write_libero_config

    # Importing LIBERO without its config file asks on stdin: write one first, as the worker does.
    write_libero_config(tmp_path, libero_package_dir(), resolve_assets_dir(None))
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path))
    torch.manual_seed(0)
    policy = build_chunk_policy(
        "gaussian", chunk_len=2, action_dim=7, proprio_dim=8, policy={"hidden_sizes": [8]}
    )
    from libero.libero import benchmark

    cfg = protocol_env_config("libero_object/1", worlds_per_task=2, image_size=32, max_episode_steps=3)
    result = evaluate_suite(policy, cfg, episodes_per_task=4)
    language = benchmark.get_benchmark_dict()["libero_object"]().get_task(1).language
    assert result.success_by_task == {language: 0.0}  # three steps cannot finish a pick-and-place
    assert "| Object | Average |" in markdown_tables([result])
