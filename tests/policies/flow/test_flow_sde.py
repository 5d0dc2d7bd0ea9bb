import math

import pytest
import torch

from vla_rl.policies.flow.chain import denoising_times
from vla_rl.policies.flow.exploration import (
    ExplorationConfig,
    build_exploration,
    chain_log_prob_and_entropy,
    sample_chain,
)
from vla_rl.policies.flow.sde import schedule_sigmas, sde_sigma, sde_transition, stochastic_step_mask


def chain_log_prob(states, means, stds, step_mask):
    stds = torch.tensor(stds).view(1, -1, *(1,) * (means.dim() - 2))
    return chain_log_prob_and_entropy(states, means, stds, step_mask)[0]


def test_sde_mean_is_the_euler_step_at_noise_level_zero():
    x, velocity = torch.randn(5, 4, 3), torch.randn(5, 4, 3)
    mean, std = sde_transition(x, velocity, t=0.7, delta=0.1, sigma=sde_sigma(0.7, 0.0, 0.9))
    torch.testing.assert_close(mean, x - 0.1 * velocity)
    assert std == 0.0


def test_sde_transition_hand_values():
    # t = 0.5, delta = 0.25, a = 1 -> sigma = sqrt(0.5 / 0.5) = 1. action_hat = 1 - 0.5 * 0.5 = 0.75,
    # noise_hat = 1 + 0.5 * 0.5 = 1.25, noise weight 0.5 - 0.25 - 0.25 / 1 = 0 -> mean 0.75 * 0.75.
    sigma = sde_sigma(0.5, 1.0, 0.9)
    assert sigma == pytest.approx(1.0)
    mean, std = sde_transition(torch.tensor([1.0]), torch.tensor([0.5]), t=0.5, delta=0.25, sigma=sigma)
    assert mean.item() == pytest.approx(0.5625)
    assert std == pytest.approx(0.5)


def test_sigma_caps_the_pole_at_t_one():
    assert sde_sigma(1.0, 0.5, 0.75) == pytest.approx(0.5 * math.sqrt(3.0))
    sigmas = schedule_sigmas(denoising_times(4), 0.5)
    assert len(sigmas) == 4
    assert sigmas[0] == pytest.approx(sigmas[1])  # the first step uses t_1 = 0.75
    with pytest.raises(ValueError, match="at least 2"):
        schedule_sigmas(denoising_times(1), 0.5)


def marginal_variance_error(t: float, delta: float, noise_level: float) -> float:
    """Variance of x_{t - delta} minus the straight path's (t - delta)^2 after one SDE step that starts
    on the path's marginal for actions fixed at c and uses the exact velocity (x - c) / t."""
    c = 0.3
    sigma = sde_sigma(t, noise_level, 0.99)

    def mean_for_noise(noise: float) -> float:
        x = torch.tensor([(1 - t) * c + t * noise])
        return sde_transition(x, (x - c) / t, t, delta, sigma)[0].item()

    noise_coefficient = mean_for_noise(1.0) - mean_for_noise(0.0)  # the mean is linear in the noise
    std = sigma * math.sqrt(delta)
    return noise_coefficient**2 + std**2 - (t - delta) ** 2


def test_sde_step_keeps_the_marginal_to_second_order_in_delta():
    # A wrong drift correction leaves a first-order error (halving delta halves it); the right
    # one leaves a second-order error (halving delta quarters it).
    coarse = marginal_variance_error(0.6, 0.02, 0.5)
    fine = marginal_variance_error(0.6, 0.01, 0.5)
    assert coarse / fine == pytest.approx(4.0, rel=0.05)
    assert abs(coarse) < 0.1 * 0.5**2 * 0.6 / 0.4 * 0.02  # far below the injected variance sigma^2 delta


def test_chain_log_prob_matches_sampled_frequencies():
    # Flow-SDE chain of K = 2 steps from x_0 = 0 with a constant velocity; x_1 is binned and the bin
    # frequencies are compared with the probabilities the chain log-density assigns to the bins.
    torch.manual_seed(0)
    num_samples, num_bins, per_bin = 200_000, 16, 64
    exploration = build_exploration(ExplorationConfig(exploration="flow_sde", noise_level=0.7), num_steps=2)

    def velocity_fn(x, k):
        return torch.full_like(x, 0.8), None

    sample = sample_chain(exploration, velocity_fn, torch.zeros(num_samples, 1, 1), 1.0, deterministic=False)
    mean, std = sample.means[0, 0, 0, 0].item(), sample.stds[0, 0, 0, 0].item()
    low, high = mean - 3 * std, mean + 3 * std
    frequencies = torch.histc(sample.states[:, 1, 0, 0], num_bins, low, high) / num_samples
    grid = torch.linspace(low, high, per_bin * num_bins + 1)
    states = torch.zeros(len(grid), 3, 1, 1)
    states[:, 1, 0, 0] = grid
    first_step_only = torch.tensor([[True, False]]).expand(len(grid), 2)
    density = chain_log_prob_and_entropy(
        states, sample.means[:1].expand(len(grid), -1, -1, -1), sample.stds[:1], first_step_only
    )[0].exp()
    probabilities = torch.stack(
        [
            torch.trapezoid(
                density[per_bin * b : per_bin * (b + 1) + 1], grid[per_bin * b : per_bin * (b + 1) + 1]
            )
            for b in range(num_bins)
        ]
    )
    binomial_std = (probabilities * (1 - probabilities) / num_samples).sqrt()
    assert ((frequencies - probabilities).abs() < 5 * binomial_std + 1e-4).all()


def test_only_masked_steps_count_in_the_chain_log_prob():
    chain = torch.tensor([[[0.0], [1.0], [2.0]]])
    means = torch.tensor([[[1.0], [1.0]]])
    both = chain_log_prob(chain, means, [1.0, 1.0], torch.tensor([[True, True]]))
    first = chain_log_prob(chain, means, [1.0, 1.0], torch.tensor([[True, False]]))
    log_norm = -0.5 * math.log(2 * math.pi)
    assert first.item() == pytest.approx(log_norm)
    assert both.item() == pytest.approx(2 * log_norm - 0.5)


def test_one_step_mask_picks_exactly_one_step_per_sample():
    mask = stochastic_step_mask(1000, 5, one_step=True, generator=torch.Generator().manual_seed(0))
    assert (mask.sum(dim=1) == 1).all()
    counts = mask.sum(dim=0).float()
    assert (counts > 150).all()  # each of the 5 steps chosen about 200 times
    assert stochastic_step_mask(3, 5, one_step=False).all()
