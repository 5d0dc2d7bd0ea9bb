"""The SAC networks: the tanh-squashed Gaussian actor's log-probability against torch's own
transformed distribution, its clamped log-std, and the critic ensemble's members."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from vla_rl.policies.sac_networks import (
    CriticEnsemble,
    SquashedGaussianActor,
    squashed_gaussian_log_prob,
    tanh_log_abs_det_jacobian,
)


@pytest.mark.parametrize("u", [-3.0, -0.7, 0.0, 0.4, 2.5])
def test_stable_tanh_jacobian_is_log_of_one_minus_tanh_squared(u):
    u = torch.tensor(u, dtype=torch.float64)
    torch.testing.assert_close(tanh_log_abs_det_jacobian(u), torch.log(1 - torch.tanh(u) ** 2))


def test_stable_tanh_jacobian_is_finite_where_tanh_rounds_to_one():
    u = torch.tensor([20.0, -20.0])
    assert torch.isinf(torch.log(1 - torch.tanh(u) ** 2)).all()
    # log(1 - tanh(u)^2) -> log 4 - 2|u| for large |u|.
    torch.testing.assert_close(tanh_log_abs_det_jacobian(u), torch.full((2,), math.log(4.0) - 40.0))


def test_log_prob_matches_torch_tanh_transformed_normal():
    mean = torch.tensor([[0.3, -1.2], [0.0, 0.8]], dtype=torch.float64)
    log_std = torch.tensor([[-0.5, 0.2], [0.1, -1.0]], dtype=torch.float64)
    pre_tanh = torch.tensor([[1.1, -0.4], [-2.0, 0.9]], dtype=torch.float64)
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform()]
    )
    expected = reference.log_prob(torch.tanh(pre_tanh)).sum(-1)
    torch.testing.assert_close(squashed_gaussian_log_prob(mean, log_std, pre_tanh), expected)


def test_actor_sample_log_prob_matches_torch_and_actions_are_bounded():
    torch.manual_seed(0)
    actor = SquashedGaussianActor(4, 3, hidden_sizes=[8]).double()
    features = torch.randn(64, 4, dtype=torch.float64)
    action, log_prob = actor.sample(features, torch.Generator().manual_seed(0))
    mean, log_std = actor(features)
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform()]
    )
    assert action.shape == (64, 3) and log_prob.shape == (64,)
    assert bool((action.abs() <= 1).all())
    torch.testing.assert_close(log_prob, reference.log_prob(action).sum(-1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(actor.deterministic(features), torch.tanh(mean))


def test_actor_log_prob_of_given_actions_by_hand():
    # Mean 0 and std 1 in both dimensions. Action 0: u = 0, log N = -ln(2 pi) / 2 = -0.9189, and the
    # tanh's Jacobian is 1 there. Action tanh(1): u = 1, log N = -0.9189 - 0.5, minus
    # log(1 - tanh(1)^2) = -0.8676: -0.5514. Action 1, a clipped one, counts as 0.999:
    # u = atanh(0.999) = 3.8002, log N = -0.9189 - 7.2208 = -8.1397, minus log(1 - 0.999^2) = -6.2151:
    # -1.9246. Rows: [0, tanh(1)] -> -1.4703; [1, 0] -> -2.8435.
    actor = SquashedGaussianActor(1, 2, hidden_sizes=[])
    with torch.no_grad():
        actor.net[0].weight.zero_()
        actor.net[0].bias.zero_()
    action = torch.tensor([[0.0, math.tanh(1.0)], [1.0, 0.0]])
    log_prob = actor.log_prob(torch.zeros(2, 1), action)
    torch.testing.assert_close(log_prob, torch.tensor([-1.4703, -2.8435]), atol=1e-4, rtol=0)


def test_actor_log_std_is_clamped():
    actor = SquashedGaussianActor(1, 1, hidden_sizes=[], log_std_min=-2.0, log_std_max=0.5)
    with torch.no_grad():
        actor.net[0].weight.zero_()
        actor.net[0].bias.copy_(torch.tensor([0.0, 10.0]))
        assert float(actor(torch.zeros(1, 1))[1]) == 0.5
        actor.net[0].bias.copy_(torch.tensor([0.0, -10.0]))
        assert float(actor(torch.zeros(1, 1))[1]) == -2.0


def test_critic_ensemble_shape_layer_norm_and_independent_members():
    torch.manual_seed(0)
    critic = CriticEnsemble(3, 2, hidden_sizes=[8, 8], num_critics=5, layer_norm=True)
    q = critic(torch.randn(4, 3), torch.rand(4, 2))
    assert q.shape == (5, 4)
    assert not torch.allclose(q[0], q[1])
    assert sum(isinstance(m, nn.LayerNorm) for m in critic.critics[0]) == 2
    plain = CriticEnsemble(3, 2, hidden_sizes=[8, 8], num_critics=2, layer_norm=False)
    assert not any(isinstance(m, nn.LayerNorm) for m in plain.modules())


def test_critic_ensemble_members_are_the_chosen_critics():
    torch.manual_seed(0)
    critic = CriticEnsemble(3, 2, [8], num_critics=4, layer_norm=True)
    features, action = torch.randn(5, 3), torch.randn(5, 2)
    every = critic(features, action)
    torch.testing.assert_close(critic(features, action, [2, 0]), every[[2, 0]])
