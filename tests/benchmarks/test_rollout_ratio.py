"""The rollout-ratio benchmark: each task with its own env config, and one pairing per repeat."""

from __future__ import annotations

from benchmarks import rollout_ratio


def test_each_task_keeps_its_own_world_count_unless_one_is_given() -> None:
    push = rollout_ratio.task_config("push", threads=1, num_envs=None)
    reach = rollout_ratio.task_config("reach", threads=1, num_envs=None)
    assert (push.env.task, push.env.num_envs) == ("push", 128)
    assert (reach.env.task, reach.env.num_envs) == ("reach", 256)
    assert rollout_ratio.task_config("lift", threads=1, num_envs=8).env.num_envs == 8


def test_every_timed_rollout_is_paired_with_raw_physics() -> None:
    cfg = rollout_ratio.task_config("reach", threads=1, num_envs=4)
    rates = rollout_ratio.paired_rollout_rates(cfg, collections=1, repeats=2)
    counts = {name: len(values) for name, values in rates.items()}
    assert counts == {"rollout": 2, "held": 2, "moving": 2, "stepwise": 2}
    assert all(rate > 0 for values in rates.values() for rate in values)


def test_each_task_keeps_its_own_network_unless_one_is_given() -> None:
    assert rollout_ratio.task_config("reach", threads=1, num_envs=None).policy.hidden_sizes == [64, 64]
    assert rollout_ratio.task_config("push", threads=1, num_envs=None).policy.hidden_sizes == [256, 256, 128]
    wide = rollout_ratio.task_config("reach", threads=1, num_envs=None, hidden_sizes=[256, 256, 128])
    assert wide.policy.hidden_sizes == [256, 256, 128]
