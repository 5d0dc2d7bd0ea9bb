"""MetaWorld backend: task lists, world-to-task assignment and config checks (no simulator needed)."""

from __future__ import annotations

import pytest
from vla_rl.sims.metaworld.batched_env import check_config
from vla_rl.sims.metaworld.experts import policy_class_name
from vla_rl.sims.metaworld.tasks import (
    INSTRUCTIONS,
    MT10_TASKS,
    MT50_TASKS,
    benchmark_tasks,
    task_onehot,
    task_onehot_transform,
    world_tasks,
)
from vla_rl.sims.metaworld.variations import variation_benchmark

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import evaluation_env_config


def test_every_task_has_one_distinct_instruction_and_mt10_is_part_of_mt50():
    assert len(MT50_TASKS) == 50 and all(task.endswith("-v3") for task in MT50_TASKS)
    assert len(set(INSTRUCTIONS.values())) == 50
    assert len(MT10_TASKS) == 10 and set(MT10_TASKS) <= set(MT50_TASKS)
    assert INSTRUCTIONS["reach-v3"] == "reach the red goal position"


def test_recorded_instructions_give_the_task_onehot_in_benchmark_order():
    obs = {
        "instruction": [INSTRUCTIONS["window-close-v3"], INSTRUCTIONS["reach-v3"], INSTRUCTIONS["push-v3"]]
    }
    onehot = task_onehot_transform("MT10")(obs)["task_onehot"]
    assert onehot.dtype.is_floating_point and onehot.shape == (3, 10)
    assert onehot.argmax(dim=1).tolist() == [9, 0, 1] and onehot.sum().item() == 3.0
    subset = task_onehot("drawer-close-v3+reach-v3", [INSTRUCTIONS["reach-v3"]])
    assert subset.tolist() == [[0.0, 1.0]]
    with pytest.raises(ValueError, match="not those of the tasks"):
        task_onehot("reach-v3", [INSTRUCTIONS["push-v3"]])


def test_world_i_runs_task_i_mod_k():
    assert world_tasks("reach-v3", 3) == ["reach-v3"] * 3
    tasks = world_tasks("MT10", 12)
    assert tasks[:10] == list(MT10_TASKS) and tasks[10:] == ["reach-v3", "push-v3"]
    assert world_tasks("MT50", 51)[50] == MT50_TASKS[0] == "assembly-v3"
    assert benchmark_tasks("MT50") == MT50_TASKS
    assert world_tasks("reach-v3+drawer-close-v3", 3) == ["reach-v3", "drawer-close-v3", "reach-v3"]


def test_block_layout_keeps_consecutive_worlds_on_one_task():
    tasks = world_tasks("reach-v3+push-v3+drawer-close-v3+window-open-v3", 16, "blocks")
    assert tasks == [
        t for t in ("reach-v3", "push-v3", "drawer-close-v3", "window-open-v3") for _ in range(4)
    ]
    assert world_tasks("reach-v3+push-v3", 3, "blocks") == ["reach-v3", "reach-v3", "push-v3"]
    with pytest.raises(ValueError, match="task_layout"):
        world_tasks("MT10", 4, "shuffled")


@pytest.mark.parametrize("task", ["reach-v2", "reach-v3+", "reach-v3+reach-v3", "MT25"])
def test_unknown_task_names_are_rejected(task):
    with pytest.raises(ValueError, match="env.task"):
        benchmark_tasks(task)


def test_policy_class_names_follow_the_task_names():
    assert policy_class_name("reach-v3") == "SawyerReachV3Policy"
    assert policy_class_name("button-press-topdown-wall-v3") == "SawyerButtonPressTopdownWallV3Policy"
    assert policy_class_name("peg-insert-side-v3") == "SawyerPegInsertionSideV3Policy"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"task": "reach-v2"}, "neither a MetaWorld v3 task"),
        ({"task": "MT25"}, "neither a MetaWorld v3 task"),
        ({"num_envs": 0}, "env.num_envs"),
        ({"control_mode": "joint_delta"}, "ee_delta_pos"),
        ({"split": "ood_visual"}, "only the 'train' split"),
        ({"cameras": ["corner"], "image_size": 0}, "env.image_size"),
        ({"options": {"terminate_on_succes": True}}, "unknown MetaWorld option"),
        ({"options": {"variations": "fixed"}}, "env.options.variations"),
        ({"options": {"benchmark_seed": -1}}, "env.options.benchmark_seed"),
        ({"options": {"benchmark_seed": True}}, "env.options.benchmark_seed"),
    ],
)
def test_bad_settings_fail_before_the_simulator_is_imported(overrides, message):
    cfg = EnvConfig(backend="metaworld", task="reach-v3", num_envs=2)
    for key, value in overrides.items():
        setattr(cfg, key, value)
    with pytest.raises(ValueError, match=message):
        check_config(cfg)


def test_options_get_their_defaults():
    defaults = {"terminate_on_success": False, "task_layout": "interleaved", "variations": "sampled"}
    cfg = EnvConfig(backend="metaworld", task="MT10")
    assert check_config(cfg) == {**defaults, "benchmark_seed": 0}
    cfg.options = {"terminate_on_success": True}
    assert check_config(cfg) == {**defaults, "benchmark_seed": 0, "terminate_on_success": True}


def test_evaluations_play_the_benchmark_variations_to_the_first_success():
    cfg = EnvConfig(backend="metaworld", task="MT10", options={"task_layout": "blocks"})
    protocol = {"variations": "benchmark", "terminate_on_success": True}
    assert evaluation_env_config(cfg).options == {**protocol, "task_layout": "blocks"}
    own = EnvConfig(backend="metaworld", task="MT10", options={"variations": "sampled"})
    assert evaluation_env_config(own).options == {**protocol, "variations": "sampled"}
    assert check_config(evaluation_env_config(cfg))["variations"] == "benchmark"


@pytest.mark.parametrize(
    ("task", "benchmark"),
    [
        ("MT10", "MT10"),
        ("MT50", "MT50"),
        ("reach-v3", "MT1:reach-v3"),
        ("assembly-v3", "MT1:assembly-v3"),
        ("reach-v3+window-open-v3", "MT10"),
        ("reach-v3+assembly-v3", "MT50"),
    ],
)
def test_each_task_takes_its_variations_from_the_benchmark_metaworld_would(task, benchmark):
    assert variation_benchmark(task) == benchmark
