"""The HG-DAgger benchmark's toy run end to end: a weak start, two rounds of deploying with the scripted
expert, recording and ``vla-rl sft`` on the aggregated takeovers from the previous round's policy."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from benchmarks import hg_dagger
from vla_rl.data.lerobot_format import open_dataset
from vla_rl.training.sft.config_load import load_sft_config_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "real_world"))
from success_models import tiny_classifier  # noqa: E402


def test_the_quick_run_aggregates_takeovers_and_trains_on_them_round_by_round(tmp_path: Path) -> None:
    work, results = tmp_path / "work", tmp_path / "results"
    hg_dagger.main(
        [
            "--quick",
            "--rounds",
            "2",
            "--eval-episodes",
            "2",
            "--work-dir",
            str(work),
            "--results-dir",
            str(results),
        ]
    )
    report = json.loads((results / "hg_dagger_run.json").read_text())
    assert report["budget"]["eval_episodes"] == 2
    rounds = report["rounds"]
    assert [row["round"] for row in rounds] == [0, 1, 2] and report["quick"]
    for row in rounds:
        assert 0.0 <= row["success_rate"] <= 1.0
    # Each round's deployment was taken over, and every takeover step landed in the aggregate.
    deployed = [row["intervention_steps"] for row in rounds[1:]]
    assert all(steps > 0 for steps in deployed)
    assert [row["aggregate_intervention_frames"] for row in rounds[1:]] == [deployed[0], sum(deployed)]
    episodes = list(open_dataset(work / "interventions").episodes())
    assert len(episodes) == 2 and sum(int(e.extras["intervention"].sum()) for e in episodes) == sum(deployed)
    # Rounds train on the aggregate (the demonstrations and the takeovers, not the policy's own
    # frames), from the previous round's weights; the control on the demonstrations alone.
    demo_frames = sum(len(e) for e in open_dataset(work / "demonstrations").episodes())
    for index in (1, 2):
        cfg = load_sft_config_file(work / f"round_{index}" / "config.yaml")
        assert cfg.data.intervention_only and cfg.data.path == str(work / "interventions")
        assert cfg.data.demonstrations == str(work / "demonstrations")
        assert cfg.policy.init_from == str(work / f"round_{index - 1}")
        takeovers = rounds[index]["aggregate_intervention_frames"]
        assert rounds[index]["frames_trained_on"] == demo_frames + takeovers
        control = load_sft_config_file(work / f"control_{index}" / "config.yaml")
        assert control.data.path == str(work / "demonstrations") and not control.data.intervention_only
        assert control.policy.init_from == str(work / ("round_0" if index == 1 else "control_1"))
        assert 0.0 <= rounds[index]["control_success_rate"] <= 1.0
    table = (results / "hg_dagger_run.md").read_text()
    assert "| 2 |" in table and f"{deployed[1]} / " in table


def test_control_eval_last_evaluates_the_control_after_the_last_round_only(tmp_path: Path) -> None:
    work, results = tmp_path / "work", tmp_path / "results"
    argv = ["--quick", "--rounds", "2", "--eval-episodes", "1", "--control-eval", "last"]
    hg_dagger.main([*argv, "--work-dir", str(work), "--results-dir", str(results)])
    report = json.loads((results / "hg_dagger_run.json").read_text())
    assert report["control_eval"] == "last"
    rounds = report["rounds"]
    # The control still trains every round (its chain of checkpoints), but is scored once.
    assert (work / "control_1" / "config.yaml").exists() and (work / "control_2" / "config.yaml").exists()
    assert rounds[1]["control_success_rate"] is None
    assert 0.0 <= rounds[2]["control_success_rate"] <= 1.0
    lines = (results / "hg_dagger_run.md").read_text().splitlines()
    round_1 = next(line for line in lines if line.startswith("| 1 |"))
    round_2 = next(line for line in lines if line.startswith("| 2 |"))
    assert round_1.split(" | ")[2] == "-" and round_2.split(" | ")[2].endswith("%")


def test_a_success_classifier_ends_the_deployed_rounds_episodes(tmp_path: Path) -> None:
    """A classifier that never fires: every deployed episode runs pick_place's 120 periods and fails
    by the classifier, while the simulator's flag is reported beside it and the evaluations keep
    using the simulator's flag."""
    classifier = tiny_classifier(tmp_path / "classifier", success_logit=-8.0)
    work, results = tmp_path / "work", tmp_path / "results"
    argv = ["--quick", "--rounds", "1", "--eval-episodes", "1", "--classifier", str(classifier)]
    hg_dagger.main([*argv, "--work-dir", str(work), "--results-dir", str(results)])
    report = json.loads((results / "hg_dagger_run.json").read_text())
    assert report["episode_end"]["classifier"] == str(classifier)
    row = report["rounds"][1]
    assert row["deploy_success_rate"] == 0.0 and row["deploy_steps"] == 120
    assert 0 <= row["held_steps"] <= row["deploy_steps"]
    assert row["classifier_agreement"] == 1.0 - row["deploy_sim_success_rate"]
    # The recording keeps the policy's inputs only: the classifier's camera is not in the aggregate.
    episode = next(iter(open_dataset(work / "interventions").episodes()))
    assert episode.images == {} and episode.privileged is not None
    assert "by the classifier" in (results / "hg_dagger_run.md").read_text()


def test_the_rounds_seed_moves_deployments_expert_and_sft_but_not_the_start(tmp_path: Path) -> None:
    assert hg_dagger.Rounds(seed=0).deploy_seed(1) == 11_000  # runs J and K's seeds
    assert hg_dagger.Rounds(seed=1).deploy_seed(2) == 112_000  # clear of every seed-0 and evaluation seed
    work, results = tmp_path / "work", tmp_path / "results"
    argv = ["--quick", "--rounds", "1", "--eval-episodes", "1", "--seed", "1"]
    hg_dagger.main([*argv, "--work-dir", str(work), "--results-dir", str(results)])
    assert json.loads((results / "hg_dagger_run.json").read_text())["seed"] == 1
    assert load_sft_config_file(work / "round_0" / "config.yaml").seed == 0
    assert load_sft_config_file(work / "round_1" / "config.yaml").seed == 1
    assert load_sft_config_file(work / "control_1" / "config.yaml").seed == 1
