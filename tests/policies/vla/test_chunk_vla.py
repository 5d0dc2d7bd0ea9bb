import torch
from test_token_vla_sampling import frequencies, frequency_bound
from vla_fixtures import make_obs, make_policy, repeat_first, sharpen

from vla_rl.policies.vla.sampling import scaled_log_probs

torch.set_num_threads(1)


def test_every_slot_is_sampled_from_its_own_masked_softmax():
    samples = 3000
    policy = make_policy("chunk_vla", chunk_len=1, action_dim=3)
    sharpen(policy, gain=15.0)
    obs = repeat_first(make_obs(1), samples)
    torch.manual_seed(2)
    step = policy.sample(obs, temperature=0.5, log_prob_level="token")
    bins = step.sample_info["action_tokens"].reshape(samples, 3) - policy.first_action_token_id
    with torch.no_grad():
        logits, _ = policy._teacher_forced(policy.encode_prompt(make_obs(1)), bins[:1])
    probs = scaled_log_probs(logits[0], 0.5).exp()
    assert float(probs.max()) > 0.05
    for slot in range(3):
        error = (frequencies(bins[:, slot], 256) - probs[slot]).abs()
        assert bool((error <= frequency_bound(probs[slot], samples)).all())
    # independence given the prompt: the chunk log-prob is the sum of slot log-probs
    expected = probs.log()[torch.arange(3)[None, :], bins]
    assert torch.allclose(step.log_prob.reshape(samples, 3), expected, atol=1e-5)


def test_slots_attend_to_each_other_and_to_the_prompt():
    policy = make_policy("chunk_vla", chunk_len=2, action_dim=2)
    prompt = policy.encode_prompt(make_obs(2))
    with torch.no_grad():
        reference, _ = policy._slot_hidden(prompt)
        policy.action_slot_embedding.add_(1.0)
        shifted, _ = policy._slot_hidden(prompt)
    # every slot changes when the slots change, including slot 0 (it sees later slots)
    assert bool(((reference - shifted).abs().amax(dim=-1) > 1e-4).all())
    other_prompt = policy.encode_prompt(make_obs(2, seed=7))
    with torch.no_grad():
        other, _ = policy._slot_hidden(other_prompt)
    assert bool(((other - shifted).abs().amax(dim=-1) > 1e-4).all())
