"""Asynchronous PPO: consumed rollouts never lag the learner by more than ``max_staleness``
versions (staler ones are dropped), and the schedule gives the same run in-process and on Ray."""

from __future__ import annotations

import pytest

from vla_rl.config import compose_train_config
from vla_rl.distributed.async_ppo import AsyncConfig, AsyncPPO
from vla_rl.distributed.runtime import InProcessRuntime, Resources

OVERRIDES = [
    "env=reach",
    "env.num_envs=8",
    "env.num_threads=1",
    "algorithm.num_steps=16",
    "algorithm.num_minibatches=2",
    "algorithm.num_epochs=2",
    "policy.hidden_sizes=[32,32]",
]


def _run(runtime, workers: int, max_staleness: int, updates: int = 6):
    learner = AsyncPPO(
        compose_train_config(OVERRIDES),
        AsyncConfig(rollout_workers=workers, max_staleness=max_staleness),
        runtime,
        resources=Resources(num_cpus=0),
    )
    try:
        return learner.train(updates)
    finally:
        learner.close()


@pytest.mark.parametrize(
    ("workers", "max_staleness", "expected_staleness", "expected_dropped"),
    [
        (1, 0, [0] * 6, 0),  # synchronous: each rollout uses the newest weights
        (2, 1, [0, 1, 1, 1, 1, 1], 0),  # two in flight: one version behind
        (2, 0, [0] * 6, 5),  # the bound forces every other rollout out
        (3, 1, [0, 1, 1, 1, 1, 1], 2),  # three in flight would lag 2 versions: those are dropped
    ],
)
def test_consumed_rollouts_respect_the_staleness_bound(
    workers, max_staleness, expected_staleness, expected_dropped
):
    result = _run(InProcessRuntime(), workers, max_staleness)
    staleness = [int(m["async/staleness"]) for m in result.history]
    assert staleness == expected_staleness
    assert result.dropped == expected_dropped
    assert all(
        m["train/policy_loss"] == m["train/policy_loss"] for m in result.history
    )  # every update learned (no NaN)


@pytest.mark.slow
def test_ray_runs_the_same_asynchronous_schedule(ray_runtime):
    """Tolerance zero: the schedule is fixed by start order, not timing, and each worker samples
    from its own RNG stream wherever it runs."""
    local = _run(InProcessRuntime(), 2, 1)
    remote = _run(ray_runtime, 2, 1)
    assert remote.history == local.history and remote.dropped == local.dropped == 0
