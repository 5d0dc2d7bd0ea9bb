import math

import pytest
import torch
from vla_fixtures import PROPRIO_DIM, make_obs, make_policy, repeat_first, sharpen

from vla_rl.policies.vla.sampling import scaled_log_probs

torch.set_num_threads(1)


def frequency_bound(probs: torch.Tensor, samples: int) -> torch.Tensor:
    """Five standard deviations of a binomial frequency (variance floor of one count)."""
    floor = torch.full_like(probs, 1.0 / samples)
    return 5.0 * torch.sqrt(torch.maximum(probs, floor) * (1.0 - probs).clamp(min=0.0) / samples)


def frequencies(bins: torch.Tensor, num_bins: int) -> torch.Tensor:
    return torch.bincount(bins, minlength=num_bins).float() / bins.numel()


def test_logits_outside_action_bins_are_minus_infinity_and_never_sampled():
    policy = make_policy("token_vla")
    first = policy.first_action_token_id
    with torch.no_grad():
        policy.vlm.lm_head.weight[:first] *= 50.0  # text tokens would win without the mask
        prompt = policy.encode_prompt(make_obs(4))
        hidden, _ = policy.run_backbone(
            prompt.embeds, prompt.attention_mask, prompt.position_ids, torch.zeros_like(prompt.attention_mask)
        )
        assert bool((policy.vocab_logits(hidden[:, -1]).argmax(-1) < first).all())
        masked = policy.masked_vocab_logits(hidden[:, -1])
    assert bool(torch.isneginf(masked[:, :first]).all())
    assert bool(torch.isfinite(masked[:, first:]).all())
    torch.manual_seed(0)
    tokens = policy.sample(make_obs(64), temperature=2.0).sample_info["action_tokens"]
    assert int(tokens.min()) >= first and int(tokens.max()) < policy.action_tokenizer.vocab_size


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_sampled_frequencies_match_masked_softmax(temperature):
    samples = 4000
    policy = make_policy("token_vla", chunk_len=1, action_dim=2)
    sharpen(policy, gain=15.0)
    obs = repeat_first(make_obs(1), samples)
    torch.manual_seed(1)
    step = policy.sample(obs, temperature=temperature)
    bins = step.sample_info["action_tokens"].reshape(samples, 2) - policy.first_action_token_id
    with torch.no_grad():
        logits, _ = policy._teacher_forced(policy.encode_prompt(obs), bins)
    first_probs = scaled_log_probs(logits[0, 0], temperature).exp()
    assert float(first_probs.max()) > 0.05  # a peaked distribution: the check has power
    assert bool(
        ((frequencies(bins[:, 0], 256) - first_probs).abs() <= frequency_bound(first_probs, samples)).all()
    )
    # second token given the most frequent first token: the autoregressive conditional
    mode = int(torch.bincount(bins[:, 0]).argmax())
    rows = bins[:, 0] == mode
    second_probs = scaled_log_probs(logits[rows.nonzero()[0, 0], 1], temperature).exp()
    count = int(rows.sum())
    assert count > 200
    error = (frequencies(bins[rows, 1], 256) - second_probs).abs()
    assert bool((error <= frequency_bound(second_probs, count)).all())
    # the same check against the other temperature's probabilities fails: the test can fail
    other = scaled_log_probs(logits[0, 0], 1.5 - temperature).exp()
    assert bool(((frequencies(bins[:, 0], 256) - other).abs() > frequency_bound(other, samples)).any())


def test_cached_and_uncached_decoding_agree():
    policy = make_policy("token_vla", chunk_len=4, action_dim=4)
    obs = make_obs(6)
    cached = policy.sample(obs, deterministic=True, log_prob_level="token")
    policy.config.use_kv_cache = False
    uncached = policy.sample(obs, deterministic=True, log_prob_level="token")
    assert torch.equal(cached.sample_info["action_tokens"], uncached.sample_info["action_tokens"])
    assert torch.allclose(cached.log_prob, uncached.log_prob, atol=1e-5)
    torch.manual_seed(3)
    sampled_uncached = policy.sample(obs, temperature=0.8).sample_info["action_tokens"]
    policy.config.use_kv_cache = True
    torch.manual_seed(3)
    assert torch.equal(policy.sample(obs, temperature=0.8).sample_info["action_tokens"], sampled_uncached)


@pytest.mark.parametrize("family", ["token_vla", "chunk_vla"])
def test_log_prob_shapes_and_evaluate_matches_sample(family):
    policy = make_policy(family, chunk_len=3, action_dim=2)
    obs = make_obs(5)
    torch.manual_seed(0)
    step = policy.sample(obs, temperature=0.7, log_prob_level="token", with_value=True)
    assert step.actions.shape == (5, 3, 2) and step.actions.dtype == torch.float32
    assert step.value.shape == (5,)
    assert step.sample_info["action_tokens"].shape == (5, 3, 2)
    expected_shapes = {"token": (5, 3, 2), "action": (5, 3), "chunk": (5,)}
    for level, shape in expected_shapes.items():
        evaluation = policy.evaluate(
            obs, step.sample_info, temperature=0.7, log_prob_level=level, with_value=True
        )
        assert evaluation.log_prob.shape == shape and evaluation.entropy.shape == shape
        reduced = {
            "token": step.log_prob,
            "action": step.log_prob.sum(-1),
            "chunk": step.log_prob.sum((-1, -2)),
        }
        assert torch.allclose(evaluation.log_prob, reduced[level], atol=1e-5)
        assert evaluation.log_prob.requires_grad
        assert torch.allclose(evaluation.value, step.value, atol=1e-6)
    token_entropy = policy.evaluate(obs, step.sample_info, temperature=0.7, log_prob_level="token").entropy
    assert bool((token_entropy > 0).all()) and bool((token_entropy <= math.log(256) + 1e-5).all())
    assert torch.allclose(policy.action_tokenizer.decode(step.sample_info["action_tokens"]), step.actions)


def test_greedy_prediction_of_a_row_does_not_depend_on_its_batch():
    policy = make_policy("token_vla")
    obs = make_obs(3)  # three instructions of different lengths -> padded prompts
    batched = policy.sample(obs, deterministic=True, log_prob_level="chunk")
    for row in range(3):
        single = {key: value[row : row + 1] for key, value in obs.items()}
        alone = policy.sample(single, deterministic=True, log_prob_level="chunk")
        assert torch.equal(alone.sample_info["action_tokens"][0], batched.sample_info["action_tokens"][row])
        assert torch.allclose(alone.log_prob[0], batched.log_prob[row], atol=1e-5)


def test_unknown_level_is_rejected():
    policy = make_policy("chunk_vla")
    with pytest.raises(ValueError):
        policy.sample(make_obs(1), log_prob_level="step")


def test_each_camera_adds_its_image_tokens_to_the_prompt():
    policy = make_policy("token_vla", camera_keys=["front", "wrist"], use_proprio=False)
    obs = make_obs(2)
    obs["rgb_wrist"] = torch.flip(obs["rgb_front"], dims=[1])
    prompt = policy.encode_prompt(obs)
    text_len = len(policy.tokenizer(obs["instruction"][0] + "\n", add_special_tokens=False)["input_ids"]) + 1
    assert prompt.length == 2 * 16 + text_len  # two cameras x (32 px / 8 px)^2 patches + <bos> text \n
    changed = dict(obs, rgb_wrist=torch.zeros_like(obs["rgb_wrist"]))
    with torch.no_grad():
        assert not torch.allclose(policy.encode_prompt(changed).embeds, prompt.embeds)
    with pytest.raises(KeyError, match="rgb_wrist"):
        policy.sample({key: value for key, value in obs.items() if key != "rgb_wrist"})


def test_state_keys_concatenate_vector_observations_into_the_state():
    obs = make_obs(2)
    obs["objects"] = torch.randn(2, 3)
    policy = make_policy("token_vla", proprio_dim=PROPRIO_DIM + 3, state_keys=["proprio", "objects"])
    assert policy.sample(obs).actions.shape == (2, 2, 3)
    del obs["objects"]
    with pytest.raises(KeyError, match="objects"):
        policy.sample(obs)


def test_state_token_sizes_give_one_prompt_token_per_group():
    obs = make_obs(2)
    one = make_policy("token_vla")
    split = make_policy("token_vla", state_token_sizes=[2, 3])  # PROPRIO_DIM = 5
    assert split.encode_prompt(obs).length == one.encode_prompt(obs).length + 1
    # Prompt: 16 image tokens, then the state tokens (positions 16 and 17). The second token
    # carries only the last three values: changing the first two moves token 16, not token 17.
    changed = dict(obs, proprio=obs["proprio"].clone())
    changed["proprio"][:, :2] += 1.0
    with torch.no_grad():
        before, after = split.encode_prompt(obs).embeds, split.encode_prompt(changed).embeds
    assert not torch.allclose(after[:, 16], before[:, 16])
    torch.testing.assert_close(after[:, 17], before[:, 17])
    with pytest.raises(ValueError, match="sum to 4"):
        make_policy("token_vla", state_token_sizes=[1, 3])
