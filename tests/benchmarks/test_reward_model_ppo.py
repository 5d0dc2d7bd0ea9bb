"""The reward-model benchmark's bookkeeping: rows from separate invocations are all kept."""

from __future__ import annotations

import json

from benchmarks import reward_model_ppo


def test_results_of_side_by_side_invocations_are_merged(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(reward_model_ppo, "RESULTS", tmp_path / "results.json")
    reward_model_ppo.record_result("push", {"dense": {"success": 0.98}})
    reward_model_ppo.record_result("push", {"mean": {"success": 0.0}}, "learned")
    reward_model_ppo.record_result("push", {"potential_bonus": {"success": 0.02}}, "learned")
    reward_model_ppo.record_result("reach", {"dense": {"success": 1.0}})
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["push"]["dense"] == {"success": 0.98}
    assert set(results["push"]["learned"]) == {"mean", "potential_bonus"}
    assert results["reach"]["dense"]["success"] == 1.0
    assert "machine" in results


def test_finished_runs_are_reported_not_repeated(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(reward_model_ppo, "ROOT", tmp_path)
    (tmp_path / "push_dense.json").write_text(json.dumps({"success": 0.5, "wall_min": 1.0}))

    def no_run(*args: object) -> None:
        raise AssertionError("a finished run must not be started again")

    monkeypatch.setattr(reward_model_ppo, "run", no_run)
    setting = reward_model_ppo.TASKS["push"]
    assert reward_model_ppo.train_ppo("push", setting, [], "push_dense")["success"] == 0.5
