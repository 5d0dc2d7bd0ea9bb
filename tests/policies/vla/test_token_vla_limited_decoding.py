"""``TokenVLA.limit_decoding``: decoding only the executed actions keeps their distribution."""

import pytest
import torch
from vla_fixtures import make_obs, make_policy

torch.set_num_threads(1)

CHUNK_LEN, ACTION_DIM, DECODED = 4, 3, 2


@pytest.mark.parametrize("use_kv_cache", [True, False])
def test_limited_decoding_draws_the_same_first_actions(use_kv_cache):
    policy = make_policy("token_vla", chunk_len=CHUNK_LEN, action_dim=ACTION_DIM)
    policy.config.use_kv_cache = use_kv_cache
    obs = make_obs(5)
    torch.manual_seed(7)
    full = policy.sample(obs, temperature=0.8, log_prob_level="action")
    policy.limit_decoding(DECODED)
    torch.manual_seed(7)
    limited = policy.sample(obs, temperature=0.8, log_prob_level="action")
    full_tokens, tokens = full.sample_info["action_tokens"], limited.sample_info["action_tokens"]
    assert tokens.shape == full_tokens.shape == (5, CHUNK_LEN, ACTION_DIM)
    # the first tokens come from the same random draws, so they are the same tokens
    assert torch.equal(tokens[:, :DECODED], full_tokens[:, :DECODED])
    assert not torch.equal(tokens, full_tokens)  # the rest was not decoded: the last decoded repeats
    assert torch.equal(tokens[:, DECODED:], tokens[:, DECODED - 1 : DECODED].expand(-1, 2, -1))
    torch.testing.assert_close(limited.log_prob[:, :DECODED], full.log_prob[:, :DECODED])
    assert bool((limited.log_prob[:, DECODED:] == 0).all())
    assert torch.equal(limited.actions[:, DECODED], limited.actions[:, DECODED - 1])


def test_limited_evaluation_scores_only_the_decoded_actions():
    policy = make_policy("token_vla", chunk_len=CHUNK_LEN, action_dim=ACTION_DIM)
    obs = make_obs(4)
    torch.manual_seed(2)
    step = policy.sample(obs, temperature=1.3, log_prob_level="token")
    with torch.no_grad():
        full = policy.evaluate(
            obs, step.sample_info, temperature=1.3, log_prob_level="token", with_value=True
        )
        policy.limit_decoding(DECODED)
        limited = policy.evaluate(
            obs, step.sample_info, temperature=1.3, log_prob_level="token", with_value=True
        )
        chunk = policy.evaluate(obs, step.sample_info, temperature=1.3, log_prob_level="chunk")
    torch.testing.assert_close(limited.log_prob[:, :DECODED], full.log_prob[:, :DECODED])
    torch.testing.assert_close(limited.entropy[:, :DECODED], full.entropy[:, :DECODED])
    assert bool((limited.log_prob[:, DECODED:] == 0).all())
    assert bool((limited.entropy[:, DECODED:] == 0).all())
    assert bool((full.log_prob[:, DECODED:] < 0).all())  # the full chunk does score them
    torch.testing.assert_close(limited.value, full.value)
    # a chunk's log-probability is that of its decoded actions
    torch.testing.assert_close(chunk.log_prob, full.log_prob[:, :DECODED].sum(dim=(1, 2)))


@pytest.mark.parametrize("steps", [0, CHUNK_LEN + 1])
def test_decoded_steps_must_fit_the_chunk(steps):
    policy = make_policy("token_vla", chunk_len=CHUNK_LEN, action_dim=ACTION_DIM)
    with pytest.raises(ValueError, match="chunk_len=4"):
        policy.limit_decoding(steps)
