"""``FlowChainPolicy.denoise``: the deterministic chain from a given initial noise (DSRL's map)."""

from __future__ import annotations

import pytest
import torch
from flow_fixtures import PROPRIO_DIM, make_flow_mlp, make_obs, make_pi0


def test_flow_mlp_denoise_is_two_euler_steps_from_the_given_noise_by_hand() -> None:
    policy = make_flow_mlp(num_denoising_steps=2)
    obs = {"proprio": torch.randn(3, PROPRIO_DIM)}
    noise = torch.randn(3, *policy.noise_shape)
    with torch.no_grad():
        features = policy.features(obs)
        # K = 2: dt = -0.5, times 1.0 then 0.5; x_{k+1} = x_k + v(x_k, t_k) * dt, clipped at the end
        x1 = noise - 0.5 * policy.velocity(features, noise, torch.full((3,), 1.0))
        x2 = x1 - 0.5 * policy.velocity(features, x1, torch.full((3,), 0.5))
    torch.testing.assert_close(policy.denoise(obs, noise), x2.clamp(-1.0, 1.0))
    assert policy.noise_shape == (2, 3)


@pytest.mark.parametrize("family", ["flow_mlp", "pi0"])
def test_denoise_equals_the_deterministic_sample_from_the_same_draw(family: str) -> None:
    policy = make_flow_mlp() if family == "flow_mlp" else make_pi0()
    obs = make_obs(2) if family == "pi0" else {"proprio": torch.randn(2, PROPRIO_DIM)}
    torch.manual_seed(7)
    sampled = policy.sample(obs, deterministic=True).actions
    torch.manual_seed(7)
    noise = torch.randn(2, *policy.noise_shape)  # the draw ``sample`` makes first
    torch.testing.assert_close(policy.denoise(obs, noise), sampled)
    assert not torch.equal(policy.denoise(obs, torch.zeros_like(noise)), sampled)


def test_pi0_noise_is_as_wide_as_the_model_and_a_wrong_shape_is_refused() -> None:
    policy = make_pi0()
    assert policy.noise_shape == (policy.chunk_len, policy.max_action_dim) == (3, 8)
    with pytest.raises(ValueError, match=r"noise must be \[N, 3, 8\]"):
        policy.denoise(make_obs(1), torch.zeros(1, 3, 4))
