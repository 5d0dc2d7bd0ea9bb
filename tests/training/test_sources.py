"""GRPO's batch source: rounds of group episodes until enough groups are informative, group seeds
distinct across the run, its state across a resume; and the statistics of several rounds as one."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from vla_rl.rollout.stats import RolloutStats, merge_stats, stats_metrics
from vla_rl.training import sources
from vla_rl.training.sources import GROUP_SEED_STRIDE, GroupRollouts


class FakeEnv:
    num_envs = 4
    max_episode_steps = 10

    def reset(self, seed: int) -> tuple[dict, dict]:
        return {}, {}

    def world_seed(self, seed: int, world: int) -> list[int]:
        return [seed, world]

    def state_dict(self) -> dict:
        raise NotImplementedError  # a backend that cannot snapshot


def stats(episodes: int, success_rate: float, mean_return: float) -> RolloutStats:
    return RolloutStats(
        episodes=episodes,
        success_rate=success_rate,
        mean_return=mean_return,
        env_steps=40,
        decisions=8,
        rollout_time_s=1.0,
        policy_time_s=0.5,
        sim_time_s=0.25,
    )


class FakeCollector:
    """Holds the seeds and decision cap of each round of ``fake_collect_episodes``."""

    chunked = True
    reward_scaler = None

    def __init__(self) -> None:
        self.rounds: list[tuple[list, int]] = []
        self.potential = torch.zeros(4)


def fake_collect_episodes(collector: FakeCollector, seeds: list, max_decisions: int):  # noqa: ANN201
    """Records the round on the collector; every second world succeeds."""
    collector.rounds.append((seeds, max_decisions))
    success = torch.tensor([True, False, True, False])
    return "batch", success, torch.ones(4), stats(4, 0.5, 1.0)


@pytest.fixture(autouse=True)
def episodes_of_the_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "collect_episodes", fake_collect_episodes)


def source(groups_per_update: int, kept_per_round: int, max_sampling_rounds: int = 5) -> GroupRollouts:
    cfg = SimpleNamespace(
        group_size=2,
        groups_per_update=groups_per_update,
        execute_steps=4,
        max_sampling_rounds=max_sampling_rounds,
        curriculum_pool=0,
    )

    def grouped_rows(batch, success, returns):  # noqa: ANN001, ANN202
        return SimpleNamespace(kept_groups=kept_per_round)

    return GroupRollouts(FakeEnv(), FakeCollector(), cfg, seed=3, grouped_rows=grouped_rows)


def test_rounds_run_until_enough_groups_were_kept_with_fresh_group_seeds() -> None:
    rollouts = source(groups_per_update=3, kept_per_round=1)
    batch, metrics = rollouts.next_batch()
    first = 3 * GROUP_SEED_STRIDE**2
    # 2 groups of 2 worlds per round; one kept per round: 3 rounds for 3 groups
    assert len(batch) == 3 and metrics["train/sampling_rounds"] == 3.0
    assert [seeds for seeds, _ in rollouts.collector.rounds] == [
        [[first + 2 * k, 0], [first + 2 * k, 0], [first + 2 * k + 1, 0], [first + 2 * k + 1, 0]]
        for k in range(3)
    ]
    assert {cap for _, cap in rollouts.collector.rounds} == {math.ceil(10 / 4) + 1}
    assert rollouts.group_counter == 6
    assert metrics["rollout/episodes"] == 12.0 and metrics["rollout/success_rate"] == 0.5


def test_the_round_cap_and_a_resumed_group_counter() -> None:
    rollouts = source(groups_per_update=0, kept_per_round=0, max_sampling_rounds=2)
    batch, metrics = rollouts.next_batch()  # no group kept: stops at the cap
    assert len(batch) == 2 and metrics["train/sampling_rounds"] == 2.0
    resumed = source(groups_per_update=0, kept_per_round=0)
    resumed.load_state_dict(rollouts.state_dict())
    assert resumed.group_seeds(1) == [3 * GROUP_SEED_STRIDE**2 + 4]


def test_merged_statistics_weigh_episode_means_by_episodes() -> None:
    merged = merge_stats([stats(1, 1.0, 3.0), stats(3, 0.0, 1.0), stats(0, math.nan, math.nan)])
    assert merged.episodes == 4 and merged.env_steps == 120 and merged.decisions == 24
    assert merged.success_rate == pytest.approx(0.25) and merged.mean_return == pytest.approx(1.5)
    assert merged.rollout_time_s == pytest.approx(3.0)
    assert math.isnan(merge_stats([stats(0, math.nan, math.nan)]).success_rate)


def test_statistics_become_rollout_and_perf_scalars_without_nan() -> None:
    assert stats_metrics(stats(0, math.nan, 2.0)) == {
        "rollout/episodes": 0.0,
        "rollout/mean_return": 2.0,
        "rollout/env_steps": 40.0,
        "rollout/decisions": 8.0,
        "perf/rollout_time_s": 1.0,
        "perf/policy_time_s": 0.5,
        "perf/sim_time_s": 0.25,
    }
