import pytest
import torch
from chunk_rollouts import config, flow_policy, rollout, snapshot, token_policy

from vla_rl.algorithms.chunk_ppo import ChunkPPO
from vla_rl.algorithms.chunk_update import executed_entry_mask

torch.set_num_threads(1)


def prepared(algorithm: ChunkPPO, batch):
    advantages, returns = batch.gae(algorithm.cfg.gae_lambda)
    flat = batch.flat({"advantages": advantages, "returns": returns})
    algorithm.recompute(flat)
    return flat


@pytest.mark.parametrize("exploration", ["flow_sde", "flow_noise"])
def test_first_minibatch_has_ratio_one_and_no_clipping(exploration):
    policy = flow_policy(exploration=exploration)
    algorithm = ChunkPPO(policy, config())
    flat = prepared(algorithm, rollout(policy))
    first = next(flat.minibatches(2, torch.Generator().manual_seed(0)))
    losses = algorithm.losses(first)
    assert losses.ratio_mean == pytest.approx(1.0, abs=1e-5)
    assert losses.clip_fraction == 0.0
    assert losses.approx_kl == pytest.approx(0.0, abs=1e-6)


def test_recomputed_log_probs_replace_stale_ones():
    policy = flow_policy(exploration="flow_sde")
    batch = rollout(policy)
    batch.log_probs = batch.log_probs + 5.0  # a rollout model that disagreed
    algorithm = ChunkPPO(policy, config())
    flat = prepared(algorithm, batch)
    assert algorithm.losses(flat).ratio_mean == pytest.approx(1.0, abs=1e-5)
    stale = ChunkPPO(policy, config(recompute_log_probs=False))
    assert stale.losses(prepared(stale, batch)).clip_fraction == 1.0


def test_clip_fraction_is_positive_after_a_large_step():
    policy = flow_policy(exploration="flow_sde")
    algorithm = ChunkPPO(policy, config(actor_lr=0.5, num_epochs=1))
    flat = prepared(algorithm, rollout(policy))
    algorithm.optimise(flat)
    assert algorithm.losses(flat).clip_fraction > 0.0


def test_critic_warmup_moves_the_value_head_only():
    policy = flow_policy()
    algorithm = ChunkPPO(policy, config(critic_warmup_iterations=1, actor_lr=1e-2))
    before = snapshot(policy)
    metrics = algorithm.update(rollout(policy), iteration=0)
    after = snapshot(policy)
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert changed and all(name.startswith("value_head.") for name in changed)
    assert metrics["actor_updated"] == 0.0
    algorithm.update(rollout(policy, seed=1), iteration=1)
    assert not torch.equal(after["velocity_net.0.weight"], snapshot(policy)["velocity_net.0.weight"])


def test_value_head_has_its_own_learning_rate():
    algorithm = ChunkPPO(flow_policy(), config(actor_lr=1e-5, value_lr=3e-3))
    rates = {group["name"]: group["lr"] for group in algorithm.optimizer.param_groups}
    assert rates == {"actor": 1e-5, "value": 3e-3}


def test_noise_head_has_its_own_rate_under_the_actors_schedule():
    policy = flow_policy(exploration="flow_noise")
    cfg = config(actor_lr=1e-3, noise_head_lr=1e-2, value_lr=3e-3, actor_lr_warmup_steps=4, num_epochs=1)
    algorithm = ChunkPPO(policy, cfg)
    groups = {group["name"]: group for group in algorithm.optimizer.param_groups}
    owner = {id(p): name for name, group in groups.items() for p in group["params"]}
    for name, parameter in policy.named_parameters():
        expected = name.split(".")[0] if name.startswith(("noise_head.", "value_head.")) else "actor"
        assert owner[id(parameter)] == {"value_head": "value"}.get(expected, expected), name
    algorithm.update(rollout(policy), iteration=0)  # two actor steps: the second at 2/4 of each rate
    rates = {group["name"]: group["lr"] for group in algorithm.optimizer.param_groups}
    assert rates == pytest.approx({"actor": 5e-4, "noise_head": 5e-3, "value": 3e-3})
    # Resumed, each group goes on from the config's full rate under the schedule.
    resumed = ChunkPPO(flow_policy(exploration="flow_noise"), cfg)
    resumed.load_state_dict(algorithm.state_dict())
    resumed.update(rollout(policy, seed=1), iteration=1)  # steps 3 and 4: full rates
    rates = {group["name"]: group["lr"] for group in resumed.optimizer.param_groups}
    assert rates == pytest.approx({"actor": 1e-3, "noise_head": 1e-2, "value": 3e-3})


def test_noise_head_moves_with_its_rate_and_stays_in_the_actor_group_without_one():
    def noise_head_change(noise_head_lr):
        policy = flow_policy(exploration="flow_noise")
        algorithm = ChunkPPO(policy, config(actor_lr=1e-5, noise_head_lr=noise_head_lr, num_epochs=1))
        before = snapshot(policy)
        algorithm.update(rollout(policy), iteration=0)
        after = snapshot(policy)
        return max(float((after[n] - before[n]).abs().max()) for n in before if n.startswith("noise_head."))

    # Adam moves a weight by about its rate per step: two steps at 1e-5 against two at 1e-3.
    assert noise_head_change(None) < 3e-5
    assert noise_head_change(1e-3) > 1e-3
    names = [
        group["name"]
        for group in ChunkPPO(flow_policy(exploration="flow_noise"), config()).optimizer.param_groups
    ]
    assert names == ["actor", "value"]
    with pytest.raises(ValueError, match="noise_head_lr"):
        ChunkPPO(flow_policy(exploration="flow_noise"), config(noise_head_lr=0.0))


def test_actor_learning_rate_warms_up_linearly_and_resumes():
    policy = flow_policy()
    cfg = config(actor_lr=1e-3, value_lr=3e-3, actor_lr_warmup_steps=4, num_epochs=1, num_minibatches=2)
    algorithm = ChunkPPO(policy, cfg)
    assert [algorithm.actor_lr(step) for step in (1, 2, 4, 9)] == pytest.approx([2.5e-4, 5e-4, 1e-3, 1e-3])
    algorithm.update(rollout(policy), iteration=0)  # two actor steps: the second ran at 2/4 of 1e-3
    rates = {group["name"]: group["lr"] for group in algorithm.optimizer.param_groups}
    assert rates == pytest.approx({"actor": 5e-4, "value": 3e-3})
    resumed = ChunkPPO(flow_policy(), cfg)
    resumed.load_state_dict(algorithm.state_dict())
    assert resumed.actor_steps == 2


def test_actor_learning_rate_decays_linearly_to_zero_after_the_warm_up():
    cfg = config(actor_lr=1e-3, actor_lr_warmup_steps=2, actor_lr_decay_steps=6)
    algorithm = ChunkPPO(flow_policy(), cfg)
    # warm-up 1/2, then from step 2 (full rate) down by 1/4 per step to 0 at step 6 and after
    rates = [algorithm.actor_lr(step) for step in range(1, 9)]
    assert rates == pytest.approx([5e-4, 1e-3, 7.5e-4, 5e-4, 2.5e-4, 0.0, 0.0, 0.0])
    without_warmup = ChunkPPO(flow_policy(), config(actor_lr=1e-3, actor_lr_decay_steps=4))
    assert [without_warmup.actor_lr(step) for step in (1, 2, 4)] == pytest.approx([7.5e-4, 5e-4, 0.0])


def test_without_an_iteration_the_warmup_counts_the_algorithms_own_updates_across_a_resume():
    policy = flow_policy()
    algorithm = ChunkPPO(policy, config(critic_warmup_iterations=2, actor_lr=1e-2))
    assert algorithm.update(rollout(policy))["actor_updated"] == 0.0
    resumed = ChunkPPO(policy, config(critic_warmup_iterations=2, actor_lr=1e-2))
    resumed.load_state_dict(algorithm.state_dict())
    assert resumed.updates == 1
    assert resumed.update(rollout(policy, seed=1))["actor_updated"] == 0.0
    assert resumed.update(rollout(policy, seed=2))["actor_updated"] == 1.0


def test_a_decay_over_updates_is_updates_times_the_gradient_steps_of_one():
    # 2 epochs x 2 minibatches = 4 actor steps per update; a decay to 0 over 2 updates is step 8:
    # the first update's steps run at 7/8, 6/8, 5/8 and 4/8 of the rate, the second's end at 0.
    policy = flow_policy()
    cfg = config(actor_lr=1e-3, num_epochs=2, num_minibatches=2, actor_lr_decay_steps=8)
    algorithm = ChunkPPO(policy, cfg)
    algorithm.update(rollout(policy), iteration=0)
    rates = {group["name"]: group["lr"] for group in algorithm.optimizer.param_groups}
    assert algorithm.actor_steps == 4
    assert rates["actor"] == pytest.approx(5e-4)
    algorithm.update(rollout(policy), iteration=1)
    rates = {group["name"]: group["lr"] for group in algorithm.optimizer.param_groups}
    assert algorithm.actor_steps == 8
    assert rates["actor"] == 0.0


def test_decay_must_end_after_the_warm_up():
    with pytest.raises(ValueError, match="actor_lr_decay_steps"):
        ChunkPPO(flow_policy(), config(actor_lr_warmup_steps=8, actor_lr_decay_steps=8))


def test_negative_actor_warmup_is_rejected():
    with pytest.raises(ValueError, match="actor_lr_warmup_steps"):
        ChunkPPO(flow_policy(), config(actor_lr_warmup_steps=-1))


def test_negative_progress_shaping_is_rejected():
    with pytest.raises(ValueError, match="progress_shaping"):
        ChunkPPO(flow_policy(), config(progress_shaping=-1.0))


def test_critic_warmup_does_not_count_as_actor_warmup():
    policy = flow_policy()
    algorithm = ChunkPPO(policy, config(critic_warmup_iterations=1, actor_lr_warmup_steps=10))
    algorithm.update(rollout(policy), iteration=0)
    assert algorithm.actor_steps == 0


def test_executed_entry_mask_keeps_executed_actions_of_valid_rows():
    valid = torch.tensor([True, False])
    mask = executed_entry_mask(torch.Size([2, 4, 3]), "token", 2, valid)
    assert mask.shape == (2, 4, 3)
    assert mask[0, :2].all() and not mask[0, 2:].any() and not mask[1].any()
    assert executed_entry_mask(torch.Size([2]), "chunk", 2, valid).tolist() == [True, False]


def gradients(policy, cfg, batch, reference=None):
    algorithm = ChunkPPO(policy, cfg, reference_policy=reference)
    flat = prepared(algorithm, batch)
    policy.zero_grad()
    algorithm.losses(flat).total.backward()
    return {name: p.grad.clone() for name, p in policy.named_parameters() if p.grad is not None}


def same(first, second) -> bool:
    return first.keys() == second.keys() and all(torch.allclose(first[k], second[k]) for k in first)


def test_entropy_bonus_changes_the_gradient_only_when_enabled():
    policy = flow_policy(exploration="flow_noise")
    batch = rollout(policy)
    off = gradients(policy, config(entropy_coef=0.0), batch)
    assert same(off, gradients(policy, config(entropy_coef=0.0), batch))
    assert not same(off, gradients(policy, config(entropy_coef=0.1), batch))


def test_kl_to_the_reference_changes_the_gradient_only_when_enabled():
    policy = flow_policy(exploration="flow_sde")
    reference = flow_policy(seed=1, exploration="flow_sde")  # a different policy
    batch = rollout(policy)
    off = gradients(policy, config(kl_coef=0.0), batch)
    assert same(off, gradients(policy, config(kl_coef=0.0), batch, reference))
    assert not same(off, gradients(policy, config(kl_coef=0.5), batch, reference))
    with pytest.raises(ValueError, match="reference"):
        ChunkPPO(policy, config(kl_coef=0.5))


@pytest.mark.parametrize(
    ("family", "level"), [("token_vla", "token"), ("token_vla", "action"), ("chunk_vla", "token")]
)
def test_token_policies_have_ratio_one_first_and_clip_after_a_large_step(family, level):
    policy = token_policy(family)
    algorithm = ChunkPPO(policy, config(log_prob_level=level, execute_steps=1, actor_lr=0.05))
    batch = rollout(policy, log_prob_level=level)
    flat = prepared(algorithm, batch)
    assert flat.tensors["old_log_prob"].shape[1] == policy.chunk_len  # one entry per token / action
    first = algorithm.losses(next(flat.minibatches(2, torch.Generator().manual_seed(0))))
    assert first.ratio_mean == pytest.approx(1.0, abs=1e-4)
    assert first.clip_fraction == 0.0
    algorithm.optimise(flat)
    assert algorithm.losses(flat).clip_fraction > 0.0


def test_token_vla_rollout_log_probs_give_ratio_one_without_recomputation():
    """``token_vla_ppo`` trusts the rollout's own log-probabilities (``recompute_log_probs: false``):
    sampling and the training forward pass must agree on them to the first minibatch's ratio."""
    policy = token_policy()
    algorithm = ChunkPPO(policy, config(log_prob_level="action", execute_steps=2, recompute_log_probs=False))
    flat = prepared(algorithm, rollout(policy, log_prob_level="action"))
    first = algorithm.losses(next(flat.minibatches(2, torch.Generator().manual_seed(0))))
    assert first.ratio_mean == pytest.approx(1.0, abs=1e-4)
    assert first.clip_fraction == 0.0
    assert first.approx_kl == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize("trains_features", [False, True])
def test_value_loss_reaches_the_shared_features_only_when_asked(trains_features):
    policy = flow_policy()
    algorithm = ChunkPPO(policy, config(critic_trains_features=trains_features))
    flat = prepared(algorithm, rollout(policy))
    policy.zero_grad()
    algorithm.losses(flat, actor_active=False).total.backward()  # the value loss alone
    assert policy.value_head[0].weight.grad.abs().sum() > 0
    shared = policy.encoder.project[0].weight.grad
    assert (shared is not None and shared.abs().sum() > 0) == trains_features


def test_executed_flags_mask_actions_a_world_did_not_run():
    mask = executed_entry_mask(
        torch.Size([2, 4]),
        "action",
        2,
        torch.tensor([True, True]),
        torch.tensor([[True, False], [True, True]]),
    )
    assert mask.tolist() == [[True, False, False, False], [True, True, False, False]]


def test_per_step_advantages_train_token_policies_and_need_sub_chunk_log_probs():
    policy = token_policy()
    algorithm = ChunkPPO(
        policy, config(log_prob_level="action", advantage_granularity="step", execute_steps=2)
    )
    metrics = algorithm.update(rollout(policy, log_prob_level="action"), iteration=0)
    assert metrics["gradient_steps"] == 2  # one epoch of 2 minibatches
    with pytest.raises(ValueError, match="advantage_granularity"):
        config(log_prob_level="chunk", advantage_granularity="step").validate()
