"""pi0 with its model in bfloat16 (``cast_model``): the model computes in bf16, everything around it
(heads, the chain's log-probabilities, the losses) in float32, and a sampled chain's log-probability
is recomputed by ``evaluate`` as the sampler computed it."""

import torch
from flow_fixtures import make_obs, make_pi0

torch.set_num_threads(1)


def test_bfloat16_model_samples_evaluates_and_trains_in_float32_around_it():
    policy = make_pi0(noise_level=0.5)
    float32_weights = {name: p.clone() for name, p in policy.model.named_parameters()}
    policy.cast_model(torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in policy.model.parameters())
    assert all(p.dtype == torch.float32 for p in policy.value_head.parameters())
    # the cast rounds each weight to bf16's 8-bit mantissa: relative error below 2^-8
    for name, p in policy.model.named_parameters():
        original = float32_weights[name]
        assert torch.allclose(p.float(), original, rtol=2**-8, atol=0), name
    obs = make_obs(3)
    torch.manual_seed(0)
    step = policy.sample(obs, with_value=True)
    assert step.actions.dtype == step.log_prob.dtype == step.value.dtype == torch.float32
    assert torch.isfinite(step.log_prob).all()
    evaluation = policy.evaluate(obs, step.sample_info, with_value=True)
    torch.testing.assert_close(evaluation.log_prob, step.log_prob, rtol=0, atol=1e-4)
    loss = policy.sft_loss(obs, torch.zeros(3, 3, 4), torch.ones(3, 3, dtype=torch.bool)).loss
    assert loss.dtype == torch.float32
    loss.backward()
    grad = policy.model.action_out_proj.weight.grad
    assert grad is not None and grad.dtype == torch.bfloat16 and grad.abs().sum() > 0


def test_bfloat16_actions_stay_close_to_float32_ones():
    obs = make_obs(4)
    noise = torch.randn(4, 3, 8, generator=torch.Generator().manual_seed(1))
    policy = make_pi0()
    float32_actions = policy.predict_action_chunk(obs, noise)
    policy.cast_model(torch.bfloat16)
    bfloat16_actions = policy.predict_action_chunk(obs, noise)
    # bf16 keeps 8 mantissa bits (0.4 % relative rounding): on actions of magnitude up to 2.1 the
    # denoised chunk moved by 0.012 here; a model path left in float32 would give 0, a broken cast far more
    assert (bfloat16_actions - float32_actions).abs().max() < 0.05
    assert not torch.equal(bfloat16_actions, float32_actions)
