import math

import pytest
import torch

from vla_rl.policies.flow import chain

NOISE_LEVEL_FOR_HALF = 0.5 / math.sqrt(0.5)
"""With K = 2 steps, sigma = noise_level * sqrt(1/2) = 0.5."""


def test_time_grid_and_step_size():
    assert chain.denoising_times(2).tolist() == [1.0, 0.5, 0.0]
    assert chain.step_size(4) == -0.25
    with pytest.raises(ValueError):
        chain.denoising_times(0)


def test_transition_std_scales_with_noise_level_and_temperature():
    assert chain.transition_std(2, NOISE_LEVEL_FOR_HALF) == pytest.approx(0.5)
    assert chain.transition_std(2, NOISE_LEVEL_FOR_HALF, temperature=2.0) == pytest.approx(1.0)
    assert chain.transition_std(8, 1.0) == pytest.approx(math.sqrt(1 / 8))
    with pytest.raises(ValueError):
        chain.transition_std(2, 0.0)


def test_two_step_1d_chain_log_prob_by_hand():
    # x0 = 0.5, v0 = 1 -> mu0 = 0.5 + 1 * (-0.5) = 0.0; sampled x1 = 0.2
    # v1 = -2 -> mu1 = 0.2 + (-2) * (-0.5) = 1.2; sampled x2 = 0.9; sigma = 0.5
    # log N(0.2; 0, 0.5^2) = -0.5 * 0.4^2 - log 0.5 - 0.5 log(2 pi) = -0.305792
    # log N(0.9; 1.2, 0.5^2) = -0.5 * 0.6^2 - log 0.5 - 0.5 log(2 pi) = -0.405792
    std = chain.transition_std(2, NOISE_LEVEL_FOR_HALF)
    dt = chain.step_size(2)
    x0 = torch.tensor([[0.5]])
    mu0 = chain.euler_mean(x0, torch.tensor([[1.0]]), dt)
    x1 = torch.tensor([[0.2]])
    mu1 = chain.euler_mean(x1, torch.tensor([[-2.0]]), dt)
    assert mu0.item() == pytest.approx(0.0)
    assert mu1.item() == pytest.approx(1.2)
    states = torch.stack([x0, x1, torch.tensor([[0.9]])], dim=1)  # [1, 3, 1]
    means = torch.stack([mu0, mu1], dim=1)
    log_prob = chain.chain_log_prob(states, means, std)
    assert log_prob.shape == (1,)
    assert log_prob.item() == pytest.approx(-0.305792 - 0.405792, abs=1e-5)


def test_dim_mask_drops_padded_dims():
    std = 0.5
    states = torch.tensor([[[[0.0, 0.0]], [[0.2, 7.0]]]])  # [N=1, K+1=2, chunk=1, D=2]
    means = torch.zeros(1, 1, 1, 2)
    masked = chain.chain_log_prob(states, means, std, torch.tensor([True, False]))
    assert masked.item() == pytest.approx(-0.305792, abs=1e-5)


def test_chain_entropy_by_hand():
    # 2 steps x 1 entry x (0.5 + 0.5 log(2 pi) + log 0.5) = 2 x 0.725792
    assert chain.chain_entropy(2, 0.5, 1) == pytest.approx(1.451584, abs=1e-5)


def test_sampled_transitions_have_the_transition_std():
    torch.manual_seed(0)
    mean = torch.full((20000, 1), 3.0)
    samples = chain.sample_transition(mean, 0.5, deterministic=False)
    assert samples.mean().item() == pytest.approx(3.0, abs=0.02)
    assert samples.std().item() == pytest.approx(0.5, abs=0.01)
    assert torch.equal(chain.sample_transition(mean, 0.5, deterministic=True), mean)
