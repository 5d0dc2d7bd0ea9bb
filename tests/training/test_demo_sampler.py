"""RLPD's minibatch with takeovers pooled as demonstrations: where a flagged transition goes, the rows
each part of a minibatch comes from, and that a run without takeovers draws what it drew before."""

from __future__ import annotations

import math

import pytest
import torch

from vla_rl.data.replay_buffer import ReplayBuffer, TransitionBatch
from vla_rl.training.off_policy.demo_sampler import DemoSampler, concatenate, intervention_replay

KEYS = ["proprio"]


def step(sampler: DemoSampler, rewards: list[float], flags: list[bool] | None) -> None:
    """One batched step whose world ``i`` has ``proprio`` = ``next_obs`` = action = ``rewards[i]``."""
    values = torch.tensor(rewards)[:, None]
    flag = None if flags is None else torch.tensor(flags)
    done = torch.zeros(len(rewards), dtype=torch.bool)
    sampler.add({"proprio": values}, values, values[:, 0], done, done, {"proprio": values + 0.5}, flag)


def filled(rewards: list[float], intervention: bool = False) -> ReplayBuffer:
    """A one-world replay of one transition per reward."""
    buffer = intervention_replay(len(rewards), "cpu", KEYS)
    sampler = DemoSampler(buffer, 1)
    for reward in rewards:
        step(sampler, [reward], [intervention])
    return buffer


def online_replay(steps: int, worlds: int = 2) -> ReplayBuffer:
    """``steps * worlds`` online transitions of rewards 0 to ``steps * worlds - 1``."""
    replay = ReplayBuffer(100, worlds, obs_keys=KEYS)
    sampler = DemoSampler(replay, 1)
    for s in range(steps):
        step(sampler, [float(s * worlds + w) for w in range(worlds)], None)
    return replay


def test_flagged_transitions_land_in_both_replays_and_the_others_only_online() -> None:
    replay, interventions = ReplayBuffer(30, 3, obs_keys=KEYS), intervention_replay(10, "cpu", KEYS)
    sampler = DemoSampler(replay, 4, interventions=interventions)
    step(sampler, [1.0, 2.0, 3.0], [False, True, True])  # worlds 1 and 2 taken over
    step(sampler, [4.0, 5.0, 6.0], [False, False, False])
    step(sampler, [7.0, 8.0, 9.0], None)  # no flag given: none taken over
    step(sampler, [10.0, 11.0, 12.0], [True, False, False])
    assert len(replay) == 12 and replay.gather(replay.valid_slots()).intervention.sum() == 3
    held = interventions.gather(interventions.valid_slots())
    assert held.reward.tolist() == [2.0, 3.0, 10.0] and held.action[:, 0].tolist() == [2.0, 3.0, 10.0]
    assert held.obs["proprio"][:, 0].tolist() == [2.0, 3.0, 10.0]
    assert held.next_obs["proprio"][:, 0].tolist() == [2.5, 3.5, 10.5] and bool(held.intervention.all())


def test_the_intervention_replay_keeps_its_last_capacity_transitions_whole() -> None:
    interventions = intervention_replay(3, "cpu", KEYS)
    sampler = DemoSampler(ReplayBuffer(30, 2, obs_keys=KEYS), 4, interventions=interventions)
    for s in range(5):  # both worlds taken over, so consecutive rows never share a frame
        step(sampler, [10.0 * s, 10.0 * s + 1], [True, True])
    held = interventions.gather(interventions.valid_slots())
    assert sorted(held.reward.tolist()) == [31.0, 40.0, 41.0]
    assert torch.equal(held.next_obs["proprio"][:, 0], held.reward + 0.5)


def test_an_empty_pool_draws_every_row_online_until_the_first_takeover() -> None:
    replay, interventions = online_replay(4), intervention_replay(10, "cpu", KEYS)
    sampler = DemoSampler(replay, 6, interventions=interventions, share=0.5)
    assert sampler.demo_rows() == 0
    batch = sampler.minibatch(torch.Generator().manual_seed(3))
    before = replay.sample(6, torch.Generator().manual_seed(3))  # what the source drew before pooling
    assert torch.equal(batch.reward, before.reward) and not bool(batch.intervention.any())
    step(sampler, [-1.0, -2.0], [False, True])
    assert sampler.demo_rows() == 3
    batch = sampler.minibatch(torch.Generator().manual_seed(3))
    assert batch.reward[:3].tolist() == [-2.0] * 3 and bool(batch.intervention[:3].all())
    assert set(batch.reward[3:].tolist()) <= {*range(8), -1.0, -2.0}  # both worlds went online


def test_demonstrations_alone_are_drawn_as_before_interventions_were_pooled() -> None:
    replay, demos = online_replay(4), filled([-1.0, -2.0, -3.0])
    sampler = DemoSampler(replay, 8, demos, intervention_replay(10, "cpu", KEYS), share=0.25)
    batch = sampler.minibatch(torch.Generator().manual_seed(5))
    generator = torch.Generator().manual_seed(5)  # the former order: online rows, then the demos'
    online = replay.sample(6, generator)
    before = concatenate(demos.sample(2, generator), online)
    assert torch.equal(batch.reward, before.reward) and torch.equal(
        batch.obs["proprio"], before.obs["proprio"]
    )


def test_pool_rows_are_drawn_uniformly_over_demonstrations_and_interventions() -> None:
    # 30 demonstrations (rewards -1..-30) and 10 intervention transitions (rewards 101..110): a pool
    # row is an intervention with p = 10 / 40. 400 minibatches of 50 pool rows: n = 20,000 draws,
    # standard deviation sqrt(p (1 - p) / n) = 0.0031; the test allows 4 of them (0.012).
    demos = filled([-float(i) for i in range(1, 31)])
    interventions = filled([100.0 + i for i in range(1, 11)], intervention=True)
    sampler = DemoSampler(online_replay(30), 100, demos, interventions, share=0.5)
    generator = torch.Generator().manual_seed(0)
    pool_rewards = []
    for _ in range(400):
        batch = sampler.minibatch(generator)
        pool, online = batch.reward[:50], batch.reward[50:]
        assert bool((online >= 0).all() & (online < 60).all())  # the online half is online only
        assert torch.equal(batch.intervention[:50], pool > 100)  # each row keeps its own flag
        pool_rewards.append(pool)
    drawn = torch.cat(pool_rewards)
    n, p = len(drawn), 10 / 40
    assert n == 20_000 and bool((drawn < 0).sum() + (drawn > 100).sum() == n)
    assert abs(float((drawn > 100).float().mean()) - p) < 4 * math.sqrt(p * (1 - p) / n)
    # Each of the 40 transitions: 500 expected draws, standard deviation sqrt(500 * 39 / 40) = 22.
    counts = torch.unique(drawn, return_counts=True)[1]
    assert len(counts) == 40 and int(counts.min()) > 500 - 110 and int(counts.max()) < 500 + 110


def test_the_intervention_replay_takes_one_transition_at_a_time() -> None:
    with pytest.raises(ValueError, match="one transition at a time"):
        DemoSampler(online_replay(1), 4, interventions=ReplayBuffer(10, 2))


def test_concatenate_keeps_row_order_and_refuses_other_keys() -> None:
    def batch(value: float, key: str = "proprio") -> TransitionBatch:
        rows = torch.full((2, 1), value)
        flags = torch.zeros(2, dtype=torch.bool)
        return TransitionBatch({key: rows}, rows, rows[:, 0], {key: rows}, flags, flags, flags)

    joined = concatenate(batch(1.0), batch(2.0), batch(3.0))
    assert joined.obs["proprio"][:, 0].tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0] and len(joined) == 6
    with pytest.raises(ValueError, match="observation keys differ"):
        concatenate(batch(1.0), batch(2.0, key="privileged"))
