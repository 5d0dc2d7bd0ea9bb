"""SAC's optional actor-loss terms on the deterministic action, by hand: behaviour cloning of the
takeover steps (``bc_coef``) and the action's mean square (``action_l2_coef``)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from test_sac import Batch, random_batch, small_sac, stub_sac

from vla_rl.algorithms.sac import SACConfig


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


def test_a_minibatch_without_takeovers_clones_nothing():
    sac = stub_sac([0.0, 0.0], log_prob=0.0, bc_coef=2.0)
    assert sac.update([four_rows([False] * 4)])["bc_loss"] == 0.0
    plain = stub_sac([0.0, 0.0], log_prob=0.0).update([four_rows([True] * 4)])
    assert "bc_loss" not in plain and "action_l2" not in plain  # both off by default


@pytest.mark.parametrize(
    ("terms", "target"),
    [({"bc_coef": 10.0}, "stored"), ({"action_l2_coef": 10.0}, "zero")],
)
def test_one_actor_step_moves_the_action_towards_the_term_s_target(terms, target):
    """From the same networks and minibatch, one actor step with the term ends nearer its target
    (the stored actions of the flagged rows, or zero) than one without it."""
    generator = torch.Generator().manual_seed(2)
    batch = random_batch(generator)
    batch = FlaggedBatch(**vars(batch), intervention=torch.arange(8) % 2 == 0)
    rows = batch.intervention

    def distance(sac) -> float:
        with torch.no_grad():
            action = sac.actor.deterministic(sac.encode(batch.obs))
        goal = batch.action if target == "stored" else torch.zeros_like(action)
        return float((action - goal)[rows].square().mean())

    distances = {}
    for name, cfg in (("with", terms), ("without", {})):
        sac = small_sac(actor_lr=1e-2, **cfg)
        sac.actor_and_alpha_step(batch)
        distances[name] = distance(sac)
    assert distances["with"] < distances["without"]


def test_negative_weights_are_refused():
    for name in ("bc_coef", "action_l2_coef"):
        with pytest.raises(ValueError, match=name):
            SACConfig(**{name: -0.1})
