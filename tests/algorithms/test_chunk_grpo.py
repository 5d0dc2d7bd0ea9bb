import pytest
import torch
from chunk_rollouts import config, flow_policy, rollout

from vla_rl.algorithms.chunk_grpo import ChunkGRPO

torch.set_num_threads(1)


def grpo(policy, **overrides):
    return ChunkGRPO(policy, config(name="vla_grpo", group_size=2, **overrides))


def test_only_informative_groups_train_and_their_advantages_are_zero_mean():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)  # 4 worlds = 2 groups of 2
    success = torch.tensor([False, False, True, False])  # group 0 all fail, group 1 mixed
    grouped = grpo(policy).grouped_rows(batch, success, torch.zeros(4))
    assert (grouped.groups, grouped.kept_groups) == (2, 1)
    rows = grouped.rows
    assert len(rows) == 2 * batch.num_decisions  # worlds 2 and 3, every decision
    advantages = rows.tensors["advantages"].view(batch.num_decisions, 2)
    torch.testing.assert_close(advantages.sum(dim=1), torch.zeros(batch.num_decisions), atol=1e-6, rtol=0)
    assert advantages[0, 0] > 0 > advantages[0, 1]  # the successful world is reinforced


def test_negative_advantage_weight_zero_leaves_the_failed_episodes_no_advantage():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)
    success = torch.tensor([False, False, True, False])
    grouped = grpo(policy, negative_advantage_weight=0.0).grouped_rows(batch, success, torch.zeros(4))
    advantages = grouped.rows.tensors["advantages"].view(batch.num_decisions, 2)
    # Group 1 = (success, failure): mean 0.5, sample std sqrt(1/2), advantages +-0.5 / sqrt(1/2)
    # = +-0.7071; the failure's is zeroed.
    torch.testing.assert_close(
        advantages[:, 0], torch.full((batch.num_decisions,), 0.7071), atol=1e-4, rtol=0
    )
    assert advantages[:, 1].abs().max().item() == 0.0


def test_batch_advantage_scale_weighs_the_groups_by_the_spread_of_their_returns():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)
    success = torch.tensor([False, True, True, False])  # both groups mixed, both kept
    returns = torch.tensor([0.0, 4.0, 2.0, 1.0])  # group 0 spreads 4, group 1 spreads 1
    per_group = grpo(policy, score="return").grouped_rows(batch, success, returns).rows
    per_batch = (
        grpo(policy, score="return", advantage_scale="batch").grouped_rows(batch, success, returns).rows
    )
    first = per_group.tensors["advantages"].view(batch.num_decisions, 4)[0]
    # Per group, (R - mean) / std gives +-0.7071 in both groups whatever their spread.
    torch.testing.assert_close(first, torch.tensor([-0.7071, 0.7071, 0.7071, -0.7071]), atol=1e-4, rtol=0)
    # Over the batch: centred [-2, 2, 0.5, -0.5], std sqrt(8.5 / 3).
    std = (8.5 / 3.0) ** 0.5
    expected = torch.tensor([-2.0, 2.0, 0.5, -0.5]) / std
    torch.testing.assert_close(
        per_batch.tensors["advantages"].view(batch.num_decisions, 4)[0], expected, atol=1e-4, rtol=0
    )


def test_return_to_go_scores_each_decision_by_the_rewards_from_it_on():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)  # 3 decisions, 4 worlds; world 1 ends in decision 1
    success = torch.tensor([False, True, True, False])  # both groups of 2 kept
    decision_rewards = batch.stacked("step_rewards").sum(dim=2)  # [3, 4]
    returns = decision_rewards.sum(dim=0)
    rows = grpo(policy, score="return_to_go").grouped_rows(batch, success, returns).rows
    advantages = rows.tensors["advantages"].view(3, 4)
    # By hand: per decision t, world i: (G[t, i] - G[t, partner]) / 2 / group std of whole returns.
    to_go = decision_rewards.flip(0).cumsum(0).flip(0)
    for group in (0, 1):
        a, b = 2 * group, 2 * group + 1
        std = abs(returns[a] - returns[b]).item() / 2**0.5
        for t in range(3):
            expected = (to_go[t, a] - to_go[t, b]).item() / 2 / std
            assert advantages[t, a].item() == pytest.approx(expected, abs=1e-4)
            assert advantages[t, b].item() == pytest.approx(-expected, abs=1e-4)
    # The first decision carries the episode-level advantage of score=return.
    episode = grpo(policy, score="return").grouped_rows(batch, success, returns).rows
    torch.testing.assert_close(advantages[0], episode.tensors["advantages"].view(3, 4)[0], atol=1e-5, rtol=0)
    assert not torch.allclose(advantages[1:], episode.tensors["advantages"].view(3, 4)[1:])


def test_discounted_return_to_go_divides_by_each_groups_pooled_std():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)  # 3 decisions, 4 worlds; world 1 ends in decision 1
    success = torch.tensor([False, True, True, False])
    decision_rewards = batch.stacked("step_rewards").sum(dim=2)  # [3, 4]
    algorithm = grpo(policy, score="return_to_go", score_discount=0.5)
    rows = algorithm.grouped_rows(batch, success, decision_rewards.sum(dim=0)).rows
    advantages = rows.tensors["advantages"].view(3, 4)
    valid = batch.stacked("valid")
    # By hand: G[t] = r[t] + 0.5 r[t + 1] + 0.25 r[t + 2]; centred on the partner at the same
    # decision; divided by the sample std of the centred values over the group's valid entries.
    r = decision_rewards
    to_go = torch.stack([r[0] + 0.5 * r[1] + 0.25 * r[2], r[1] + 0.5 * r[2], r[2]])
    for group in (0, 1):
        a, b = 2 * group, 2 * group + 1
        half_gap = (to_go[:, a] - to_go[:, b]) / 2
        kept = torch.cat([half_gap[valid[:, a]], -half_gap[valid[:, b]]])
        std = (kept.square().sum() / (len(kept) - 1)).sqrt().item()
        for t in range(3):
            expected_a = half_gap[t].item() / std if valid[t, a] else 0.0
            expected_b = -half_gap[t].item() / std if valid[t, b] else 0.0
            assert advantages[t, a].item() == pytest.approx(expected_a, abs=1e-4)
            assert advantages[t, b].item() == pytest.approx(expected_b, abs=1e-4)


def test_score_discount_is_validated():
    with pytest.raises(ValueError, match="score_discount"):
        config(name="vla_grpo", score="return_to_go", score_discount=1.5).validate()
    with pytest.raises(ValueError, match="return_to_go"):
        config(name="vla_grpo", score="return", score_discount=0.9).validate()


def test_advantage_scale_is_validated():
    with pytest.raises(ValueError, match="advantage_scale"):
        config(name="vla_grpo", advantage_scale="episode").validate()


def test_filtered_groups_contribute_nothing_to_the_gradient():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)
    success = torch.tensor([False, False, True, False])
    algorithm = grpo(policy)
    grouped = algorithm.grouped_rows(batch, success, torch.zeros(4))
    algorithm.recompute(grouped.rows)
    policy.zero_grad()
    algorithm.losses(grouped.rows).total.backward()
    with_filter = [p.grad.clone() for p in policy.parameters() if p.grad is not None]
    # Changing what the dropped group did (its observations and samples) changes nothing.
    other = rollout(policy, seed=7, with_value=False)
    for t in range(batch.num_decisions):
        for key in ("proprio",):
            other.obs[key][t][2:] = batch.obs[key][t][2:]
        for key in other.sample_info:
            other.sample_info[key][t][2:] = batch.sample_info[key][t][2:]
    regrouped = algorithm.grouped_rows(other, success, torch.zeros(4))
    algorithm.recompute(regrouped.rows)
    policy.zero_grad()
    algorithm.losses(regrouped.rows).total.backward()
    for before, after in zip(
        with_filter, [p.grad for p in policy.parameters() if p.grad is not None], strict=True
    ):
        torch.testing.assert_close(before, after)


def test_all_uninformative_rollouts_skip_the_update():
    policy = flow_policy()
    algorithm = grpo(policy)
    grouped = algorithm.grouped_rows(
        rollout(policy, with_value=False), torch.zeros(4, dtype=torch.bool), torch.zeros(4)
    )
    assert grouped.rows is None
    assert algorithm.update([grouped]) == {"groups": 2.0, "kept_groups": 0.0}


def test_first_grpo_minibatch_has_ratio_one():
    policy = flow_policy(exploration="flow_sde", sde_one_step=True)
    algorithm = grpo(policy)
    grouped = algorithm.grouped_rows(
        rollout(policy, with_value=False), torch.tensor([True, False, False, True]), torch.zeros(4)
    )
    algorithm.recompute(grouped.rows)
    losses = algorithm.losses(next(grouped.rows.minibatches(2, torch.Generator().manual_seed(0))))
    assert losses.ratio_mean == pytest.approx(1.0, abs=1e-5)
    assert losses.clip_fraction == 0.0


def test_decision_fraction_trains_on_a_random_share_of_the_kept_decisions():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)
    success = torch.tensor([True, False, False, True])  # both groups kept: 4 worlds' decisions
    kept = 4 * batch.num_decisions
    seen: list[torch.Tensor] = []

    def optimise(rows):
        seen.append(rows.tensors["row"])
        return {}

    for fraction, expected in ((1.0, kept), (0.5, round(0.5 * kept)), (1e-6, 1)):
        algorithm = grpo(policy, decision_fraction=fraction)
        algorithm.optimise = optimise
        grouped = algorithm.grouped_rows(batch, success, torch.zeros(4))
        grouped.rows.tensors["row"] = torch.arange(kept)  # which kept decision each row is
        metrics = algorithm.update([grouped])
        assert metrics["trained_decisions"] == expected == len(seen[-1])
    assert seen[0].tolist() == list(range(kept))
    # The half: distinct kept decisions in their rollout order, not simply the first ones.
    half = seen[1].tolist()
    assert half == sorted(set(half)) and half != list(range(len(half)))
    with pytest.raises(ValueError, match="decision_fraction"):
        config(name="vla_grpo", decision_fraction=0.0).validate()
    with pytest.raises(ValueError, match="GRPO setting"):  # PPO would ignore it silently
        config(name="vla_ppo", decision_fraction=0.5).validate()


def test_worlds_must_split_into_groups():
    policy = flow_policy()
    with pytest.raises(ValueError, match="groups of 3"):
        ChunkGRPO(policy, config(name="vla_grpo", group_size=3)).grouped_rows(
            rollout(policy, with_value=False), torch.zeros(4, dtype=torch.bool), torch.zeros(4)
        )


def test_chunk_algorithms_are_registered_by_name():
    from vla_rl.algorithms.registry import build_chunk_algorithm, registered_chunk_algorithms

    assert registered_chunk_algorithms() == ["vla_grpo", "vla_ppo"]
    assert isinstance(build_chunk_algorithm(config(name="vla_grpo"), flow_policy()), ChunkGRPO)
    with pytest.raises(ValueError, match="unknown algorithm"):
        config(name="vla_dpo").validate()


def test_a_group_with_an_episode_cut_short_by_a_dead_env_worker_does_not_train():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy, with_value=False)
    success = torch.tensor([False, True, True, False])  # both groups mixed
    batch.lost[3] = True  # world 3's episode was cut short: its group has no score
    grouped = grpo(policy).grouped_rows(batch, success, torch.zeros(4))
    assert (grouped.groups, grouped.kept_groups) == (2, 1)
    assert len(grouped.rows) == 2 * batch.num_decisions  # worlds 0 and 1
