"""pi0's prefix reuse: all K denoising steps of stored chains in one batched call, and a frozen VLM's
prefix stored per row and reused by ``evaluate``, give what encoding and stepping one by one gives
(the step-by-step recomputation is ``benchmarks.pi0_update_speed``'s peer)."""

from __future__ import annotations

import pytest
import torch
from flow_fixtures import INSTRUCTIONS, make_obs, make_pi0

from benchmarks.pi0_update_speed import step_by_step_transitions
from vla_rl.policies.flow.exploration import chain_log_prob_and_entropy
from vla_rl.policies.flow.pi0_prefix import PREFIX_KEYS, PREFIX_MASK, repeat_prefix
from vla_rl.rollout.flat_batch import concat_zero_padded

torch.set_num_threads(1)


def log_prob_and_grads(policy, means, stds, states, step_mask):
    log_prob, _ = chain_log_prob_and_entropy(states, means, stds, step_mask, policy.action_dim_mask)
    trained = [p for name, p in policy.named_parameters() if not name.startswith("model.model.vlm.")]
    grads = torch.autograd.grad(log_prob.sum(), trained, allow_unused=True)
    return log_prob, [torch.zeros_like(p) if g is None else g for p, g in zip(trained, grads, strict=True)]


@pytest.mark.parametrize(
    "exploration", [{"exploration": "flow_sde", "noise_level": 0.4}, {"exploration": "flow_noise"}]
)
def test_batched_recomputation_matches_the_steps_one_by_one(exploration):
    policy = make_pi0(seed=0, **exploration)
    obs = make_obs(6, seed=3)
    with torch.no_grad():
        sampled = policy.sample(obs)
    states, step_mask = sampled.sample_info["chain"], sampled.sample_info["step_mask"]
    batched = policy.transitions_of_chain(policy.encode_prefix(obs), states, step_mask, 1.0)
    reference = step_by_step_transitions(policy, policy.encode_prefix(obs), states, step_mask, 1.0)
    for got, want in zip(batched, reference, strict=True):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    log_prob, grads = log_prob_and_grads(policy, *batched[:2], states, step_mask)
    want_log_prob, want_grads = log_prob_and_grads(policy, *reference[:2], states, step_mask)
    torch.testing.assert_close(log_prob, want_log_prob, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(log_prob, sampled.log_prob, atol=1e-4, rtol=1e-5)  # ratio 1
    assert any(float(g.abs().sum()) > 0 for g in grads)
    for got, want in zip(grads, want_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_repeat_prefix_leaves_the_original_cache_alone():
    policy = make_pi0(seed=0)
    prefix = policy.encode_prefix(make_obs(3))
    keys = prefix.key_values.layers[0].keys.clone()
    repeated = repeat_prefix(prefix, 4)
    assert repeated.key_values.layers[0].keys.shape[0] == 12
    torch.testing.assert_close(repeated.key_values.layers[0].keys[4:8], keys[1:2].expand(4, -1, -1, -1))
    assert torch.equal(repeated.attention_mask[8], prefix.attention_mask[2])
    torch.testing.assert_close(prefix.key_values.layers[0].keys, keys)


def frozen_pi0():
    policy = make_pi0(seed=1, exploration="flow_noise")
    policy.model.model.vlm.requires_grad_(False)
    return policy


def test_stored_prefix_rows_padded_to_a_longer_prompt_evaluate_as_a_fresh_prefix():
    policy = frozen_pi0()
    obs = make_obs(9, seed=5)  # instructions cycle through three lengths
    with torch.no_grad():
        sampled = policy.sample(obs, with_value=True)
    short = [i for i in range(9) if obs["instruction"][i] == min(INSTRUCTIONS, key=len)]
    rest = [i for i in range(9) if i not in short]

    def rows(index):
        return {
            "rgb_front": obs["rgb_front"][index],
            "proprio": obs["proprio"][index],
            "instruction": [obs["instruction"][i] for i in index],
        }

    parts = [policy.observation_cache(rows(index)) for index in (short, rest)]
    assert parts[0][PREFIX_MASK].shape[1] < parts[1][PREFIX_MASK].shape[1]  # padding is exercised
    cache = {key: concat_zero_padded([part[key] for part in parts]) for key in parts[0]}
    order = short + rest
    info = {key: value[order] for key, value in sampled.sample_info.items()}
    fresh = policy.evaluate(rows(order), info, with_value=True)
    # the short-prompt rows alone: their stored rows carry zero padding beyond their own prompt
    short_info = {key: value[short] for key, value in sampled.sample_info.items()}
    alone = policy.evaluate(rows(short), short_info, with_value=True)
    short_cache = {key: value[: len(short)] for key, value in cache.items()}
    cached_alone = policy.evaluate(rows(short), {**short_info, **short_cache}, with_value=True)
    cached = policy.evaluate(rows(order), {**info, **cache}, with_value=True)
    for got, want in ((cached, fresh), (cached_alone, alone)):
        torch.testing.assert_close(got.log_prob, want.log_prob, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(got.value, want.value, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got.entropy, want.entropy)
    torch.testing.assert_close(cached.log_prob, sampled.log_prob[order], atol=1e-4, rtol=1e-5)


def test_no_observation_cache_while_the_vlm_trains_or_when_switched_off():
    obs = make_obs(2)
    assert make_pi0(seed=0).observation_cache(obs) == {}  # the VLM's parameters train
    frozen = frozen_pi0()
    cache = frozen.observation_cache(obs)
    assert cache[PREFIX_KEYS].shape[:2] == (2, frozen.model.config.vlm_config.text_config.num_hidden_layers)
    assert not cache[PREFIX_KEYS].requires_grad
    frozen.set_exploration(reuse_frozen_prefix=False)
    assert frozen.observation_cache(obs) == {}
