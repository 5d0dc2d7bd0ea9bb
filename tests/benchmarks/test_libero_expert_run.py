"""``benchmarks.libero_expert`` shortened on a real LIBERO task (`make test-libero`, in `.venv-libero`;
a check of the machinery, not a result), and its env and table checked by hand anywhere."""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks.libero_expert import expert_env_config, markdown, run_suite


def test_expert_env_is_one_world_per_task_in_protocol_order_without_cameras():
    cfg = expert_env_config("libero_object", workers=2)
    assert (cfg.num_envs, cfg.cameras, cfg.max_episode_steps) == (10, [], 0)
    assert cfg.options == {"init_states": "protocol", "warmup_steps": 10, "workers": 2}
    assert expert_env_config("libero_spatial/4", workers=1).num_envs == 1


def test_table_lists_each_task_with_its_failed_initial_states():
    suite = {
        "suite": "libero_object",
        "max_episode_steps": 280,
        "env_steps": 1234,
        "wall_time_s": 90.0,
        "tasks": [
            {"task": "libero_object/0", "instruction": "a", "success_rate": 1.0, "failed_init_states": [],
             "median_length": 97.0},
            {"task": "libero_object/1", "instruction": "b", "success_rate": 0.5, "failed_init_states": [1],
             "median_length": 140.0},
        ],
    }  # fmt: skip
    table = markdown([suite], episodes_per_task=2)
    # mean of 100 % and 50 %
    assert "**libero_object**: mean 75.0 %, 1,234 env steps, 1.5 min, limit 280 steps" in table
    assert "| libero_object/1 | b | 50 % | 140 | 1 |" in table
    assert "| libero_object/0 | a | 100 % | 97 | - |" in table


@pytest.mark.skipif(
    importlib.util.find_spec("libero") is None,
    reason="LIBERO is not installed here; `make test-libero` runs this in .venv-libero",
)
def test_expert_run_on_a_real_task_reports_each_initial_state():
    result = run_suite(expert_env_config("libero_object/2", workers=1), episodes_per_task=2)
    (task,) = result["tasks"]
    assert task["instruction"] == "pick up the salad dressing and place it in the basket"
    assert task["success_rate"] == 1.0 and task["failed_init_states"] == []
    assert 50 < task["median_length"] < 280 and result["env_steps"] >= 100
