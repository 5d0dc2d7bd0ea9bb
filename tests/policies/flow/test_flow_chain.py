"""The denoising time grid and the Euler-Maruyama exploration, checked by hand."""

import math

import pytest
import torch

from vla_rl.policies.flow import chain
from vla_rl.policies.flow.exploration import (
    ExplorationConfig,
    build_exploration,
    chain_log_prob_and_entropy,
    sample_chain,
)

NOISE_LEVEL_FOR_HALF = 0.5 / math.sqrt(0.5)
"""With K = 2 steps, sigma = noise_level * sqrt(1/2) = 0.5."""
LOG_N_04 = -0.5 * 0.4**2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)  # log N(0.4 away; std 0.5) = -0.305792
LOG_N_06 = -0.5 * 0.6**2 - math.log(0.5) - 0.5 * math.log(2 * math.pi)  # -0.405792


def euler_maruyama(noise_level: float, num_steps: int = 2):
    return build_exploration(
        ExplorationConfig(exploration="euler_maruyama", noise_level=noise_level), num_steps
    )


def test_time_grid_and_step_size():
    assert chain.denoising_times(2).tolist() == [1.0, 0.5, 0.0]
    assert chain.step_size(4) == -0.25
    with pytest.raises(ValueError):
        chain.denoising_times(0)


def test_euler_maruyama_std_scales_with_noise_level_and_temperature():
    x, stochastic = torch.zeros(1, 1), torch.tensor([True])
    assert euler_maruyama(NOISE_LEVEL_FOR_HALF).transition(x, x, 0, stochastic, 1.0)[
        1
    ].item() == pytest.approx(0.5)
    assert euler_maruyama(NOISE_LEVEL_FOR_HALF).transition(x, x, 0, stochastic, 2.0)[
        1
    ].item() == pytest.approx(1.0)
    assert euler_maruyama(1.0, 8).transition(x, x, 0, stochastic, 1.0)[1].item() == pytest.approx(
        math.sqrt(1 / 8)
    )
    assert euler_maruyama(1.0).transition(x, x, 0, torch.tensor([False]), 1.0)[1].item() == 0.0


def test_two_step_1d_chain_log_prob_and_entropy_by_hand():
    # x0 = 0.5, v0 = 1 -> mu0 = 0.5 + 1 * (-0.5) = 0.0; x1 = 0.2 (0.4 sigma away)
    # v1 = -2 -> mu1 = 0.2 + (-2) * (-0.5) = 1.2; x2 = 0.9 (0.6 sigma away); sigma = 0.5
    exploration = euler_maruyama(NOISE_LEVEL_FOR_HALF)
    states = torch.tensor([[[0.5], [0.2], [0.9]]])  # [1, 3, 1]
    stochastic = torch.tensor([True])
    mu0, std0 = exploration.transition(states[:, 0], torch.tensor([[1.0]]), 0, stochastic, 1.0)
    mu1, std1 = exploration.transition(states[:, 1], torch.tensor([[-2.0]]), 1, stochastic, 1.0)
    assert (mu0.item(), mu1.item()) == (pytest.approx(0.0), pytest.approx(1.2))
    means, stds = torch.stack([mu0, mu1], 1), torch.stack([std0, std1], 1)
    log_prob, entropy = chain_log_prob_and_entropy(states, means, stds, torch.ones(1, 2, dtype=torch.bool))
    assert log_prob.item() == pytest.approx(LOG_N_04 + LOG_N_06, abs=1e-5)
    # 2 steps x (0.5 + 0.5 log(2 pi) + log 0.5)
    assert entropy.item() == pytest.approx(1.451584, abs=1e-5)


def test_mean_reduction_averages_over_each_samples_stochastic_steps():
    # The two-step chain above, and beside it one whose second step is deterministic: the mean is the
    # sum over the stochastic steps divided by how many there are (2 and 1).
    states = torch.tensor([[[0.5], [0.2], [0.9]], [[0.5], [0.2], [0.9]]])
    means = torch.tensor([[[0.0], [1.2]], [[0.0], [1.2]]])
    stds = torch.tensor([[[0.5], [0.5]], [[0.5], [0.0]]])
    step_mask = torch.tensor([[True, True], [True, False]])
    log_prob, entropy = chain_log_prob_and_entropy(states, means, stds, step_mask, reduction="mean")
    assert log_prob.tolist() == pytest.approx([(LOG_N_04 + LOG_N_06) / 2, LOG_N_04], abs=1e-5)
    assert entropy.tolist() == pytest.approx([1.451584 / 2, 1.451584 / 2], abs=1e-5)
    with pytest.raises(ValueError, match="reduction"):
        chain_log_prob_and_entropy(states, means, stds, step_mask, reduction="max")


def test_dim_mask_drops_padded_dims():
    states = torch.tensor([[[[0.0, 0.0]], [[0.2, 7.0]]]])  # [N=1, K+1=2, chunk=1, D=2]
    means, stds = torch.zeros(1, 1, 1, 2), torch.full((1, 1, 1, 2), 0.5)
    masked, _ = chain_log_prob_and_entropy(
        states, means, stds, torch.ones(1, 1, dtype=torch.bool), torch.tensor([True, False])
    )
    assert masked.item() == pytest.approx(LOG_N_04, abs=1e-5)


def test_sampled_transitions_have_the_transition_std():
    torch.manual_seed(0)

    def constant_velocity(x, k):
        return torch.full_like(x, -6.0), None  # one Euler step of dt = -1/2 moves x by +3

    exploration = euler_maruyama(NOISE_LEVEL_FOR_HALF, num_steps=2)
    sampled = sample_chain(exploration, constant_velocity, torch.zeros(20000, 1), 1.0, deterministic=False)
    first = sampled.states[:, 1]
    assert first.mean().item() == pytest.approx(3.0, abs=0.02)
    assert first.std().item() == pytest.approx(0.5, abs=0.01)
    noise_free = sample_chain(exploration, constant_velocity, torch.zeros(3, 1), 1.0, deterministic=True)
    assert noise_free.states[:, -1].tolist() == [[6.0]] * 3
    assert not noise_free.step_mask.any()
