"""The HIL benchmark's toy run end to end, over real roscores inside a private network namespace: the
weak start, the success classifier trained, its episode rule chosen on validation episodes, the
classifier scored on held-out episodes at that rule, and two ``vla-rl
learn-online --rehearsal`` sessions of residual SAC on the frozen start (the scripted expert taking
over in one, nobody in the other) whose episodes carry the simulator's flag beside the classifier's,
and a final evaluation of each learner, whose exploration ``benchmarks.hil_exploration`` then
measures."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "real_world"))
from namespaces import private_namespace_unavailable  # noqa: E402


def _unavailable() -> str | None:
    if shutil.which("roscore") is None:
        return "roscore is not installed (make ros installs ROS 1 from the system's packages)"
    return private_namespace_unavailable()


@pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))
def test_the_quick_run_learns_online_from_the_start_with_and_without_takeovers(tmp_path: Path) -> None:
    work, results = tmp_path / "work", tmp_path / "results"
    command = [
        sys.executable, "-m", "benchmarks.hil_pick_place", "--quick", "--classifier-episodes", "3", "6",
        "--choose-rule", "--work-dir", str(work), "--results-dir", str(results),
    ]  # fmt: skip
    # The module re-runs itself inside `unshare -n`, so its roscores see only their own loopback.
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    logs = "".join(f"\n--- {p}\n{p.read_text()[-1500:]}" for p in sorted(work.glob("*/*.log")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + logs
    report = json.loads((results / "hil_pick_place.json").read_text())
    assert report["quick"] and 0.0 <= report["start"]["eval"]["success_once_rate"] <= 1.0
    assert report["start"]["weak"] == (report["start"]["eval"]["success_once_rate"] <= 0.3)
    classifier = report["classifier"]
    # a third of the 3 + 6 training episodes held out: 1 of the expert's, 2 of the start's
    assert classifier["episodes"] == 3 and classifier["frames"] > 0
    for key in ("frame_accuracy", "episode_accuracy"):
        assert 0.0 <= classifier[key] <= 1.0
    # the rule is chosen on as many validation episodes (other seeds), and the sessions' settings take it
    rule, settings = report["episode_rule"], report["settings"]
    assert rule["episodes"] == 3 and len(rule["grid"]) == 36
    assert (settings["threshold"], settings["consecutive_steps"]) == (
        rule["threshold"],
        rule["consecutive_steps"],
    )
    sessions = {row["name"]: row for row in report["sessions"]}
    assert set(sessions) == {"with_expert", "no_interventions"}
    seeds = {name: [e["seed"] for e in row["per_episode"]] for name, row in sessions.items()}
    assert seeds["with_expert"] == seeds["no_interventions"] == [1000, 1001, 1002]  # the same episodes
    assert (
        sessions["with_expert"]["intervention_steps"]
        > 0
        == sessions["no_interventions"]["intervention_steps"]
    )
    for name, row in sessions.items():
        episodes = row["per_episode"]
        assert all(isinstance(e["sim_success"], bool) for e in episodes)  # the ground truth of each
        agree = sum(e["sim_success"] == e["success"] for e in episodes) / len(episodes)
        assert row["classifier_agreement"] == pytest.approx(agree)
        assert row["learner"]["updates"] > 0 and row["final_eval"]["episodes"] == 2
        learner = OmegaConf.load(work / name / "learner" / "config.yaml")
        assert learner.frozen_policy.mode == "residual" and learner.algorithm.name == "sac"
        assert Path(learner.frozen_policy.checkpoint) == (work / "round_0").resolve()
        actor = json.loads((work / name / "actor_0" / "online_summary.json").read_text())
        assert actor["sim_success_rate"] is not None
    # watch probability 1: the expert watched every episode; the teleop topics decide nothing ahead
    assert [e["watched"] for e in sessions["with_expert"]["per_episode"]] == [True] * 3
    assert [e["watched"] for e in sessions["no_interventions"]["per_episode"]] == [None] * 3
    assert "with_expert" in (results / "hil_pick_place_table.md").read_text()
    exploration_of_a_session_learner(work / "with_expert" / "learner", sessions["with_expert"])
    from benchmarks.hil_exploration import takeover_imitation

    assert takeover_imitation(None, work / "no_interventions" / "learner") is None  # no takeovers kept
    refit_of_a_session_learner(work / "with_expert" / "learner", sessions["with_expert"])


def refit_of_a_session_learner(run_dir: Path, session: dict) -> None:
    """``benchmarks.hil_refit`` on a quick session's learner: a new actor, before any update, has a mean
    action near zero (the last layer's small gain) and so explains about none of the takeovers it
    is fitted on; both points are evaluated on the same episodes. Takeovers of runs on the same start
    pool (here the same run twice: each run's rows split alike); a saved actor is one run's."""
    from benchmarks.hil_refit import measure

    row = measure([run_dir], "fresh", [5], episodes=2, worlds=2, lr=3e-4, held_out_share=0.2)
    assert row["rows"] == session["intervention_steps"]
    assert row["fit_rows"] + row["held_out_rows"] == row["rows"] and row["held_out_rows"] >= 1
    start, refitted = row["points"]
    assert (start["updates"], refitted["updates"]) == (0, 5)
    assert start["explained_variance_fit"] == pytest.approx(0.0, abs=0.05)
    assert start["mean_residual"]["episodes"] == refitted["mean_residual"]["episodes"] == 2
    pooled = measure([run_dir, run_dir], "fresh", [1], episodes=1, worlds=1, lr=3e-4, held_out_share=0.2)
    assert (pooled["fit_rows"], pooled["held_out_rows"]) == (2 * row["fit_rows"], 2 * row["held_out_rows"])
    with pytest.raises(ValueError, match="one run"):
        measure([run_dir, run_dir], "saved", [1], episodes=1, worlds=1, lr=3e-4, held_out_share=0.2)
    # The expert's labels on every online transition: on the takeover rows they are the stored residuals
    # up to the controller's round trip (a few hundredths of the action range in run I's rows).
    relabelled = measure([run_dir], "fresh", [1], 1, 1, 3e-4, 0.2, labels="expert")
    (agreement,) = relabelled["expert_labels_against_stored"]
    assert agreement["takeover_rows"] == session["intervention_steps"] < relabelled["rows"]
    assert agreement["explained_variance_of_stored"] > 0.8 and agreement["median_abs_difference"] < 0.05


def exploration_of_a_session_learner(run_dir: Path, session: dict) -> None:
    """``benchmarks.hil_exploration`` on a quick session's learner: both evaluations run, and with the
    actor's head set to mean 0 and std 0.05 (before the tanh) a sample lies ``scale * 0.05 *
    sqrt(2 / pi)`` from the mean action on average (E|Z| of a standard normal; tanh is nearly linear
    there), over 8 samples x 2 worlds x 5 periods x 4 dimensions. The learner kept every takeover
    step of the session; a mean residual of 0 reproduces none of them (slope 0)."""
    from benchmarks.hil_exploration import measure, sample_spread, takeover_imitation
    from vla_rl.training.off_policy.networks import load_off_policy_run

    row = measure(run_dir, episodes=2, worlds=2, steps=3)
    assert row["mean_residual"]["episodes"] == row["sampled_residual"]["episodes"] == 2
    assert row["spread"]["states"] == 2 * 3 and row["spread"]["residual_scale"] == 0.2
    assert row["takeovers"]["transitions"] == session["intervention_steps"]
    policy, wrap = load_off_policy_run(run_dir)
    head = [m for m in policy.actor.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        head.weight.zero_()
        head.bias[:4] = 0.0
        head.bias[4:] = math.log(0.05)
    torch.manual_seed(0)
    spread = sample_spread(policy, wrap, worlds=2, steps=5)
    assert spread["median_pre_tanh_std"] == pytest.approx(0.05)
    assert spread["mean_sample_distance"] == pytest.approx(0.2 * 0.05 * math.sqrt(2 / math.pi), rel=0.15)
    imitation = takeover_imitation(policy, run_dir)
    assert imitation["slope"] == 0.0 and imitation["slope_per_dim"] == [0.0] * 4
    assert math.isnan(imitation["slope_stored_on_mean"])  # 0 / 0: a zero mean has no slope
    assert imitation["explained_variance"] == pytest.approx(0.0)  # it explains none of them
    assert imitation["median_pre_tanh_std_per_dim"] == pytest.approx([0.05] * 4)


def test_the_slope_through_the_origin_by_hand() -> None:
    # sum(x y) = 0.5 + 3 + 0.5 = 4, sum(x^2) = 1 + 4 + 1 = 6: 2/3; the other way, sum(y^2) = 2.75:
    # 4 / 2.75 = 1.4545.
    from benchmarks.hil_exploration import slope_through_origin

    x, y = torch.tensor([[1.0, 2.0, -1.0]]), torch.tensor([[0.5, 1.5, -0.5]])
    assert slope_through_origin(x, y) == pytest.approx(2 / 3)
    assert slope_through_origin(y, x) == pytest.approx(4 / 2.75)


def test_the_success_flag_diagnostic_leaves_the_classifier_out(tmp_path: Path) -> None:
    """``--success sim`` gives the sessions no classifier settings, so ``learn-online --rehearsal``
    ends their episodes on the simulator's flag; the item's sessions use the classifier."""
    from vla_rl.real_world.learn_online import rehearsal_overrides
    from vla_rl.real_world.online_config import compose_learn_online_config

    from benchmarks.hil_pick_place import Settings, session_overrides

    kinds = {}
    for success in ("classifier", "sim"):
        given = session_overrides(
            tmp_path / "start", tmp_path / "classifier", tmp_path / "out", True, 1, Settings(success=success)
        )[1:]  # without --master-port, an option of the command
        kinds[success] = compose_learn_online_config(rehearsal_overrides(given)).success.kind
    assert kinds == {"classifier": "classifier", "sim": "sim"}


def test_the_learner_takes_the_residual_range_the_entropy_target_and_the_cloning_kind(
    tmp_path: Path,
) -> None:
    """``--residual-scale``, ``--target-entropy`` and ``--bc-loss-type`` reach the learner's validated
    config; by default SAC keeps its own target (minus the action dimension) and clones by the mean's
    squared error."""
    from vla_rl.real_world.learn_online import rehearsal_overrides
    from vla_rl.real_world.online_config import compose_learn_online_config, learner_config

    from benchmarks.hil_pick_place import Settings, session_overrides

    found = {}
    for settings in (Settings(), Settings(residual_scale=1.0, target_entropy=-10.44, bc_loss_type="nll")):
        given = session_overrides(
            tmp_path / "start", tmp_path / "classifier", tmp_path / "out", True, 1, settings
        )
        learner = learner_config(compose_learn_online_config(rehearsal_overrides(given[1:])))
        found[settings.residual_scale] = (
            learner.frozen_policy.residual_scale,
            learner.algorithm.target_entropy,
            learner.algorithm.bc_loss_type,
        )
    assert found == {0.2: (0.2, None, "mse"), 1.0: (1.0, -10.44, "nll")}


def test_the_sessions_take_the_watching_chance_and_the_budget(tmp_path: Path) -> None:
    """``--watch-probability`` reaches the session's validated intervention section, the episode
    budget its actors and the session cap its learner."""
    from vla_rl.real_world.learn_online import rehearsal_overrides
    from vla_rl.real_world.online_config import compose_learn_online_config, learner_config

    from benchmarks.hil_pick_place import Settings, session_overrides

    settings = Settings(watch_probability=0.5, episodes=400, session_cap_minutes=60.0)
    given = session_overrides(
        tmp_path / "start", tmp_path / "classifier", tmp_path / "out", True, 1, settings
    )
    cfg = compose_learn_online_config(rehearsal_overrides(given[1:]))
    assert (cfg.intervention.kind, cfg.intervention.watch_probability, cfg.episodes) == ("expert", 0.5, 400)
    assert learner_config(cfg).max_minutes == 60.0
