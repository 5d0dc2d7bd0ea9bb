import torch
from flow_fixtures import PROPRIO_DIM, make_obs, make_pi0

from vla_rl.policies.flow.normalization import NormStats

torch.set_num_threads(1)


def test_prompt_has_one_placeholder_per_patch_then_bos_instruction_separator():
    policy = make_pi0()
    inputs = policy.prepare_inputs(make_obs(3))
    image_token_id = policy.model.config.vlm_config.image_token_id
    patches = (32 // 8) ** 2
    assert inputs.pixel_values.shape == (3, 1, 3, 32, 32)
    assert inputs.pixel_values.min() >= -1.0 and inputs.pixel_values.max() <= 1.0
    assert inputs.pixel_attention_mask.all()
    assert (inputs.input_ids[:, :patches] == image_token_id).all()
    assert (inputs.input_ids[:, patches] == policy.tokenizer.bos_token_id).all()
    lengths = inputs.attention_mask.sum(dim=1)
    assert lengths.unique().numel() > 1, "instructions of different lengths must be padded"
    for row, length in zip(inputs.attention_mask, lengths.tolist(), strict=True):
        assert row[:length].all() and not row[length:].any(), "padding is on the right"
    assert inputs.state.shape == (3, policy.model.config.max_state_dim)
    assert (inputs.state[:, PROPRIO_DIM:] == 0).all()


def test_cached_prefix_deterministic_chain_equals_sample_actions():
    policy = make_pi0()
    obs = make_obs(4)
    inputs = policy.prepare_inputs(obs)
    noise = torch.randn(4, policy.chunk_len, policy.max_action_dim)
    with torch.no_grad():
        reference = policy.model.sample_actions(
            state=inputs.state,
            input_ids=inputs.input_ids,
            pixel_values=inputs.pixel_values,
            noise=noise.clone(),
            attention_mask=inputs.attention_mask,
            pixel_attention_mask=inputs.pixel_attention_mask,
        )
        prefix = policy.encode_prefix(obs)
        ours = policy.run_chain(prefix, noise.clone(), 1.0, deterministic=True)[0].states[:, -1]
    torch.testing.assert_close(ours, reference, atol=1e-6, rtol=1e-6)
    assert prefix.key_values.get_seq_length() == prefix.prefix_length, (
        "velocity calls crop back to the prefix"
    )


def test_cached_velocity_equals_the_uncached_forward():
    policy = make_pi0()
    obs = make_obs(2)
    inputs = policy.prepare_inputs(obs)
    x_t = torch.randn(2, policy.chunk_len, policy.max_action_dim)
    t = torch.tensor([0.7, 0.3])
    with torch.no_grad():
        uncached = policy.model(
            state=inputs.state,
            noise=x_t,
            timestep=t,
            input_ids=inputs.input_ids,
            pixel_values=inputs.pixel_values,
            pixel_attention_mask=inputs.pixel_attention_mask,
            attention_mask=inputs.attention_mask,
        ).logits
        prefix = policy.encode_prefix(obs)
        first, hidden = policy.velocity(prefix, x_t, t)
        second, _ = policy.velocity(prefix, x_t, t)
    torch.testing.assert_close(first, uncached, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(second, first)
    assert hidden.shape == (2, 1 + policy.chunk_len, policy.model.config.dit_config.hidden_size)


def test_evaluate_recomputes_the_sampled_chain_log_prob():
    policy = make_pi0()
    obs = make_obs(3)
    step = policy.sample(obs, temperature=0.8, with_value=True)
    assert step.actions.shape == (3, policy.chunk_len, 4)
    assert step.sample_info["chain"].shape == (
        3,
        policy.num_steps + 1,
        policy.chunk_len,
        policy.max_action_dim,
    )
    assert step.log_prob.shape == (3,)
    evaluation = policy.evaluate(obs, step.sample_info, temperature=0.8, with_value=True)
    torch.testing.assert_close(evaluation.log_prob, step.log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(evaluation.value, step.value, atol=1e-5, rtol=1e-5)
    (evaluation.log_prob.sum() + evaluation.value.sum()).backward()
    assert policy.model.action_out_proj.weight.grad is not None
    assert policy.model.model.vlm.vision_tower.embeddings.patch_embedding.weight.grad is not None


def test_value_depends_on_the_observation_only():
    policy = make_pi0()
    obs = make_obs(3)
    torch.manual_seed(0)
    first = policy.sample(obs, with_value=True).value
    torch.manual_seed(1)
    second = policy.sample(obs, with_value=True).value
    assert first.shape == (3,)
    torch.testing.assert_close(first, second, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(first, policy.sample(make_obs(3, seed=9), with_value=True).value)


def test_actions_are_unpadded_and_unnormalised_with_the_stored_statistics():
    stats = NormStats("mean_std", mean=[0.1, 0.2, 0.3, 0.4], std=[0.5, 0.5, 0.25, 0.25])
    policy = make_pi0(action_stats=stats)
    env_actions = torch.tensor([[[0.6, -0.3, 0.55, 0.4]]])
    model_actions = policy.to_model_actions(env_actions)
    assert model_actions.shape == (1, 1, policy.max_action_dim)
    torch.testing.assert_close(
        model_actions[0, 0, :4], torch.tensor([1.0, -1.0, 1.0, 0.0]), atol=1e-6, rtol=0
    )
    assert (model_actions[..., 4:] == 0).all()
    padded = model_actions.clone()
    padded[..., 4:] = 9.0
    torch.testing.assert_close(policy.to_env_actions(padded), env_actions, atol=1e-6, rtol=0)


def test_sft_loss_masks_padded_steps_and_dims():
    policy = make_pi0()
    obs = make_obs(2)
    actions = torch.rand(2, policy.chunk_len, 4) * 2 - 1
    mask = torch.tensor([[True, True, False], [True, False, False]])
    torch.manual_seed(4)
    loss = policy.sft_loss(obs, actions, mask).loss
    garbage = actions.clone()
    garbage[~mask] = 50.0
    torch.manual_seed(4)
    assert policy.sft_loss(obs, garbage, mask).loss.item() == loss.item()
    assert policy.model.config.loss_reduction == "mean", "the model's config is restored"


def test_update_normalizer_fits_state_mean_and_std_over_batches(tmp_path):
    policy = make_pi0()
    first, second = make_obs(2, seed=1), make_obs(3, seed=2)
    first["proprio"][:, 4] = 7.0  # a constant dimension is centred, not scaled
    second["proprio"][:, 4] = 7.0
    policy.update_normalizer(first)
    policy.update_normalizer(second)
    states = torch.cat([first["proprio"], second["proprio"]]).double()
    stats = policy.cfg.state_stats
    assert stats.mode == "mean_std"
    torch.testing.assert_close(torch.tensor(stats.mean, dtype=torch.float64), states.mean(0))
    expected_std = states.std(0, unbiased=False)
    expected_std[4] = 1.0
    torch.testing.assert_close(torch.tensor(stats.std, dtype=torch.float64), expected_std)
    normalised = policy.prepare_inputs(first).state[:, :PROPRIO_DIM]
    torch.testing.assert_close(normalised[:, 4], torch.zeros(2))
    policy.save_pretrained(str(tmp_path))
    assert type(policy).from_pretrained(str(tmp_path)).cfg.state_stats == stats
