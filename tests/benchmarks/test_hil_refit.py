"""``benchmarks.hil_refit``'s parts, on small actors: the split of the kept takeovers, the new actor, the
cloning steps and the explained variance. Its run on a session's learner is in
``test_hil_pick_place.py``, after the quick sessions."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from benchmarks.hil_refit import explained, fresh_actor, refit, split_rows
from vla_rl.policies.sac_networks import SquashedGaussianActor


def test_the_last_share_of_the_takeovers_is_held_out() -> None:
    assert split_rows(10, 0.2) == (slice(0, 8), slice(8, 10))
    assert split_rows(11, 0.2) == (slice(0, 9), slice(9, 11))  # round(2.2) = 2
    assert split_rows(3, 0.01) == (slice(0, 2), slice(2, 3))  # at least one held out
    assert split_rows(2, 0.9) == (slice(0, 1), slice(1, 2))  # at least one fitted
    assert split_rows(1, 0.2) == (slice(0, 1), slice(1, 1))  # one row: nothing to hold out


def test_a_fresh_actor_has_the_saved_one_s_shape_and_its_seed_s_weights() -> None:
    torch.manual_seed(5)
    saved = SquashedGaussianActor(6, 3, [16, 8], "tanh", log_std_min=-4.0, log_std_max=1.0)
    first, second = fresh_actor(saved, "tanh", 0), fresh_actor(saved, "tanh", 0)
    shapes = {name: p.shape for name, p in saved.named_parameters()}
    assert {name: p.shape for name, p in first.named_parameters()} == shapes
    assert (first.log_std_min, first.log_std_max) == (-4.0, 1.0)
    other_seed = dict(fresh_actor(saved, "tanh", 1).named_parameters())
    for name, weight in first.named_parameters():
        assert torch.equal(weight, dict(second.named_parameters())[name])
        if name.endswith("weight"):  # biases start at zero in every actor
            assert not torch.equal(weight, dict(saved.named_parameters())[name])
            assert not torch.equal(weight, other_seed[name])


def test_cloning_steps_move_the_mean_action_to_the_stored_one() -> None:
    """A stored residual of 0.5 in every row and dimension: the squared error of the mean action
    ``tanh(mean)`` falls from about 0.25 (a new actor's mean is near 0) to near 0."""
    torch.manual_seed(0)
    actor = SquashedGaussianActor(4, 2, [32, 32])
    features, stored = torch.randn(64, 4), torch.full((64, 2), 0.5)
    with torch.no_grad():
        assert (actor.deterministic(features) - stored).square().mean() == pytest.approx(0.25, abs=0.02)
    optimizer = torch.optim.Adam(actor.parameters(), lr=1e-2)
    loss = refit(actor, features, stored, 300, optimizer, torch.Generator().manual_seed(0))
    assert loss < 1e-3
    with torch.no_grad():
        assert actor.deterministic(features) == pytest.approx(stored, abs=0.03)
    assert math.isnan(refit(actor, features, stored, 0, optimizer, torch.Generator()))  # no step


def test_the_explained_variance_of_the_stored_residuals_by_hand() -> None:
    """``1 - var(stored - mean action) / var(stored)``: a zero mean action explains none of stored
    residuals; stored residuals equal to the mean action are explained in full, and twice it leaves
    ``var(a) / var(2 a)`` = 1/4 unexplained."""
    torch.manual_seed(0)
    actor, features = SquashedGaussianActor(2, 2, [8]), torch.randn(10, 2)
    with torch.no_grad():
        own = actor.deterministic(features)
    assert own.std() > 0
    assert explained(actor, features, own) == pytest.approx(1.0)
    assert explained(actor, features, 2 * own) == pytest.approx(0.75)
    head = [m for m in actor.net.modules() if isinstance(m, torch.nn.Linear)][-1]
    torch.nn.init.zeros_(head.weight)
    torch.nn.init.zeros_(head.bias)
    stored = torch.tensor([[0.5, -0.5], [-0.5, 0.5]]).repeat(5, 1)
    assert explained(actor, features, stored) == pytest.approx(0.0)


def test_the_command_line_reaches_the_measurement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.hil_refit as hil_refit

    calls = []

    def fake_measure(*args: object) -> dict:
        calls.append(args)
        return {"runs": ["a", "b"], "start": args[1], "seed": args[-2], "labels": args[-1], "rows": 10,
                "fit_rows": 8, "held_out_rows": 2, "points": []}  # fmt: skip

    monkeypatch.setattr(hil_refit, "measure", fake_measure)
    hil_refit.main(
        ["a", "b", "--updates", "5", "10", "--starts", "fresh", "--seed", "3", "--labels", "expert",
         "--episodes", "7", "--results-dir", str(tmp_path), "--results-name", "r"]
    )  # fmt: skip
    (call,) = calls
    assert call[0] == [Path("a"), Path("b")] and call[1:] == ("fresh", [5, 10], 7, 10, 3e-4, 0.2, 3, "expert")
    assert "expert labels" in (tmp_path / "r_table.md").read_text()
    assert json.loads((tmp_path / "r.json").read_text())["refits"][0]["labels"] == "expert"
    with pytest.raises(SystemExit):
        hil_refit.main(["a", "--updates", "0"])
