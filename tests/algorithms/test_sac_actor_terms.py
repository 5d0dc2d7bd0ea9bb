"""SAC's optional actor-loss terms, by hand: behaviour cloning of the takeover steps (``bc_coef``, by
the deterministic action's squared error or by the Gaussian's likelihood) and the deterministic
action's mean square (``action_l2_coef``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from test_sac import Batch, ConstantCritics, random_batch, small_sac, state, stub_sac

from vla_rl.algorithms.sac import SAC
from vla_rl.algorithms.sac_config import SACConfig
from vla_rl.policies.sac_networks import SquashedGaussianActor


@dataclass
class FlaggedBatch(Batch):
    intervention: torch.Tensor


def four_rows(intervention: list[bool]) -> FlaggedBatch:
    return FlaggedBatch(
        obs={"state": torch.zeros(4, 1)},
        action=torch.tensor([[0.3], [-0.7], [0.8], [0.1]]),
        reward=torch.zeros(4),
        next_obs={"state": torch.zeros(4, 1)},
        terminated=torch.ones(4, dtype=torch.bool),
        intervention=torch.tensor(intervention),
    )


def test_actor_terms_by_hand():
    # The stub actor's deterministic action is 0.3 everywhere. Rows 2 and 3 are takeovers with
    # actions -0.7 and 0.8: squared errors 1.0 and 0.25, mean 0.625, times bc_coef 2 = 1.25. The
    # penalty is 0.5 * 0.3^2 = 0.045. The SAC part: alpha 1 * log pi (-1) - mean Q (1 and 3: 2) = -3.
    # (The actor step alone: update() would first move the critics by a critic step.)
    sac = stub_sac([1.0, 3.0], log_prob=-1.0, bc_coef=2.0, action_l2_coef=0.5)
    metrics = {
        k: float(v) for k, v in sac.actor_and_alpha_step(four_rows([False, True, True, False])).items()
    }
    assert metrics["bc_loss"] == pytest.approx(1.25)
    assert metrics["action_l2"] == pytest.approx(0.045)
    assert metrics["actor_loss"] == pytest.approx(-3.0 + 1.25 + 0.045)


def test_cloning_by_likelihood_by_hand():
    # The actor's Gaussian has mean 0 and std 1 in both dimensions. Row 1's stored action
    # [0, tanh(1)] has log pi = -0.9189 - 0.5514 = -1.4703; row 2's [1, 0] (clipped, counted as 0.999)
    # -1.9246 - 0.9189 = -2.8435 (tests/policies/test_sac_networks.py works both out). Per dimension:
    # 0.7351 and 1.4218, mean 1.0785, times bc_coef 2 = 2.1569. Rows 0 and 3 are not takeovers.
    actor = SquashedGaussianActor(1, 2, hidden_sizes=[])
    with torch.no_grad():
        actor.net[0].weight.zero_()
        actor.net[0].bias.zero_()
    sac = SAC(actor, ConstantCritics([0.0, 0.0]), state, SACConfig(bc_coef=2.0, bc_loss_type="nll"))
    batch = four_rows([False, True, True, False])
    batch.action = torch.tensor([[0.5, 0.5], [0.0, math.tanh(1.0)], [1.0, 0.0], [0.2, 0.2]])
    terms = sac.action_terms(state(batch.obs), batch)
    assert float(terms["bc_loss"].detach()) == pytest.approx(2.1569, abs=1e-4)


@pytest.mark.parametrize("kind", ["mse", "nll"])
def test_only_cloning_by_likelihood_narrows_the_width_where_the_takeovers_are(kind):
    """The stored actions of the takeover rows are the actor's own deterministic ones. The squared
    error is then 0 and moves nothing; the likelihood is highest for a narrower Gaussian, so a small
    plain-gradient step on it lowers the log std of those rows."""
    generator = torch.Generator().manual_seed(2)
    batch = random_batch(generator)
    rows = torch.arange(8) % 2 == 0
    sac = small_sac(bc_coef=10.0, bc_loss_type=kind)
    features = sac.encode(batch.obs)
    with torch.no_grad():
        stored = sac.actor.deterministic(features)
    batch = FlaggedBatch(**{**vars(batch), "action": stored}, intervention=rows)

    def log_std_sum() -> float:
        with torch.no_grad():
            return float(sac.actor(features)[1][rows].sum())

    before = log_std_sum()
    loss = sac.action_terms(features, batch)["bc_loss"]
    parameters = list(sac.actor.parameters())
    with torch.no_grad():
        for parameter, gradient in zip(parameters, torch.autograd.grad(loss, parameters), strict=True):
            parameter -= 1e-3 * gradient
    if kind == "mse":
        assert log_std_sum() == before
    else:
        assert log_std_sum() < before - 1e-3


def test_a_minibatch_without_takeovers_clones_nothing():
    sac = stub_sac([0.0, 0.0], log_prob=0.0, bc_coef=2.0)
    assert sac.update([four_rows([False] * 4)])["bc_loss"] == 0.0
    plain = stub_sac([0.0, 0.0], log_prob=0.0).update([four_rows([True] * 4)])
    assert "bc_loss" not in plain and "action_l2" not in plain  # both off by default


@pytest.mark.parametrize(
    ("terms", "target"),
    [
        ({"bc_coef": 10.0}, "stored"),
        ({"bc_coef": 10.0, "bc_loss_type": "nll"}, "stored"),
        ({"action_l2_coef": 10.0}, "zero"),
    ],
)
def test_a_step_down_each_term_s_gradient_moves_the_action_towards_its_target(terms, target):
    """A small plain-gradient step on the term alone brings the deterministic action nearer the term's
    target: the stored actions of the flagged rows (behaviour cloning), or zero on every row (the
    penalty). The distance is measured here, from the action and the target, not from the term.

    The term alone, not a whole actor step: SAC's step is Adam's, whose first move is the sign of the
    summed gradient per weight. Whether that move brings the action nearer depends on how the random
    critic's gradient compares with the term's, not on the term."""
    generator = torch.Generator().manual_seed(2)
    batch = random_batch(generator)
    batch = FlaggedBatch(**vars(batch), intervention=torch.arange(8) % 2 == 0)
    rows = batch.intervention if target == "stored" else torch.ones(8, dtype=torch.bool)
    sac = small_sac(**terms)
    with torch.no_grad():  # start away from zero, where the penalty has a gradient: actions near tanh(1)
        sac.actor.net[-1].bias[: sac.actor.action_dim] += 1.0

    def distance() -> float:
        with torch.no_grad():
            action = sac.actor.deterministic(sac.encode(batch.obs))
        goal = batch.action if target == "stored" else torch.zeros_like(action)
        return float((action - goal)[rows].square().mean())

    before = distance()
    loss = sum(sac.action_terms(sac.encode(batch.obs), batch).values())
    parameters = list(sac.actor.parameters())
    with torch.no_grad():
        for parameter, gradient in zip(parameters, torch.autograd.grad(loss, parameters), strict=True):
            parameter -= 1e-3 * gradient
    assert distance() < before - 1e-4


def test_negative_weights_and_unknown_cloning_kinds_are_refused():
    for name in ("bc_coef", "action_l2_coef"):
        with pytest.raises(ValueError, match=name):
            SACConfig(**{name: -0.1})
    with pytest.raises(ValueError, match="bc_loss_type"):
        SACConfig(bc_loss_type="l1")
