"""``max_minutes`` bounds a chunk-RL run, evaluations included, on a clock the test moves by hand:
each evaluation takes ``eval_s`` and each update ``update_s`` of it, so every decision of the rule
is worked out below in seconds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tiny_chunk_rl import flow_policy_dir, overrides

import vla_rl.training.budget as budget_module
import vla_rl.training.chunk_rl.trainer as trainer_module
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer


class HandClock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def run_on_hand_clock(tmp_path, monkeypatch, eval_s: float, update_s: float, *extra: str):
    clock = HandClock()
    for module in (budget_module, trainer_module):
        monkeypatch.setattr(module, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    cfg = compose_rl_config(
        [
            *overrides(tmp_path / "run", flow_policy_dir(tmp_path)),
            "iterations=1000",
            "max_minutes=1",
            "eval.interval=0",
            "checkpoint_interval=1000",
            *extra,
        ]
    )
    trainer = ChunkRLTrainer(cfg)
    evaluate, run_iteration = trainer.evaluate, trainer.run_iteration

    def timed_evaluate(split):  # noqa: ANN001, ANN202
        clock.now += eval_s
        return evaluate(split)

    def timed_iteration():  # noqa: ANN202
        clock.now += update_s
        return run_iteration()

    trainer.evaluate, trainer.run_iteration = timed_evaluate, timed_iteration
    try:
        result = trainer.train()
    finally:
        trainer.close()
    return result, clock.now


def test_training_stops_early_enough_for_the_final_evaluation(tmp_path, monkeypatch):
    # Cap 60 s; the first evaluation ends at 5 s. Another 4 s update fits while 60 - t >= 4 + 5:
    # after k updates t = 5 + 4k, so the 12th starts at t = 49 and the 13th (at 53) does not; the
    # final evaluation ends at 58 s, within the cap.
    result, end_s = run_on_hand_clock(tmp_path, monkeypatch, 5.0, 4.0)
    assert (result.stop_reason, result.iterations) == ("time", 12)
    assert [(e["iteration"], e["seconds"]) for e in result.evaluations] == [(0, 5.0), (12, 5.0)]
    assert end_s == pytest.approx(58.0) and result.wall_time_s == pytest.approx(58.0)


def test_out_of_distribution_splits_are_dropped_when_the_evaluations_would_take_over_half_the_cap(
    tmp_path, monkeypatch, caplog
):
    # A 10 s evaluation: two splits before and after would take 40 s, over half of 60; env.split's
    # two take 20 s. Updates then fit while 60 - (10 + 4k) >= 4 + 10: 10 updates, the last evaluation
    # ends at 60 s.
    with caplog.at_level("INFO", logger="vla_rl.training.chunk_rl.trainer"):
        result, end_s = run_on_hand_clock(tmp_path, monkeypatch, 10.0, 4.0, "eval.ood_splits=[ood_position]")
    plan = next(r.message for r in caplog.records if r.message.startswith("plan: "))
    assert plan.startswith(
        "plan: 1000 updates (to update 1000); evaluations of 2 episodes on train, ood_position"
    )
    assert "cap 1 min, evaluations included" in plan
    assert any("ood_position" in r.message and "dropped" in r.message for r in caplog.records)
    assert result.iterations == 10
    assert [(e["iteration"], e["split"]) for e in result.evaluations] == [(0, "train"), (10, "train")]
    assert end_s == pytest.approx(60.0)


def test_no_final_evaluation_when_two_would_take_over_half_the_cap(tmp_path, monkeypatch):
    # A 20 s evaluation: before and after would take 40 s, over half the cap. The run trains while
    # 60 - (20 + 4k) >= 4: 10 updates, ending at 60 s with the starting evaluation only.
    result, end_s = run_on_hand_clock(tmp_path, monkeypatch, 20.0, 4.0)
    assert result.iterations == 10
    assert [e["iteration"] for e in result.evaluations] == [0]
    assert end_s == pytest.approx(60.0)
