"""The RL benchmark's verdict: +30 points or 90 %, from the closing evaluation when it exists."""

from __future__ import annotations

import math

import pytest

from benchmarks import rl_pick_place


def row(before: float, after: float, judged: dict | None = None, mode: str = "sampled") -> dict:
    built = {"eval_mode": mode, "before": {"train": before}, "after": {"train": after}}
    if judged is not None:
        built["judged"] = {"episodes": 512, "worlds": 64, **judged}
    return built


def test_the_closing_evaluation_decides_when_present() -> None:
    # The run's own evaluations say +18.8; the 512-episode closing evaluation says +33.0.
    judged = {"SFT": {"sampled": 0.354}, "RL": {"sampled": 0.684}}
    assert rl_pick_place.judged_success(row(0.5, 0.688, judged)) == (0.354, 0.684)
    assert rl_pick_place.passes(row(0.5, 0.688, judged))
    # ... and the other way round: its +29.0 fails even where the run's own evaluations say +40.
    short = {"SFT": {"greedy": 0.40, "sampled": 0.10}, "RL": {"greedy": 0.69, "sampled": 0.90}}
    assert not rl_pick_place.passes(row(0.3, 0.7, short, mode="greedy"))


def test_reaching_90_percent_passes_whatever_the_gain() -> None:
    judged = {"SFT": {"sampled": 0.85}, "RL": {"sampled": 0.90}}
    assert rl_pick_place.passes(row(0.0, 0.0, judged))


def test_rows_without_a_closing_evaluation_fall_back_to_the_runs_own() -> None:
    assert rl_pick_place.judged_success(row(0.328, 0.656)) == (0.328, 0.656)
    assert rl_pick_place.passes(row(0.328, 0.656))
    assert not rl_pick_place.passes(row(0.5, 0.688))


def test_a_failed_closing_evaluation_gives_no_pass() -> None:
    failed = row(0.0, 1.0, {"error": 1})
    assert all(math.isnan(value) for value in rl_pick_place.judged_success(failed))
    assert not rl_pick_place.passes(failed)


def test_a_resumed_runs_repeated_iterations_count_once_with_their_later_values(tmp_path) -> None:
    # The first segment logs iterations 0-3 at 0 % and crashes; the resumed one, from a checkpoint
    # at iteration 1, logs 2-5 at 100 % through the run's logger, which has TensorBoard drop the
    # first segment's 2 and 3. Six iterations, one episode each: quarters [0], [1, 2], [3], [4, 5]
    # read 0, 50, 100 and 100 %.
    from vla_rl.config.schema import LoggerConfig
    from vla_rl.training.loggers import build_logger

    run_dir = tmp_path / "run"
    cfg = LoggerConfig(progress_bar=False, wandb_mode="disabled")
    for initial, steps, value in ((0, range(4), 0.0), (1, range(2, 6), 1.0)):
        logger = build_logger(cfg, run_dir, 6, {}, initial_env_steps=initial)
        for step in steps:
            logger.log({"rollout/success_rate": value, "rollout/episodes": 1.0}, step)
        logger.close()
    assert rl_pick_place.sampled_success_by_quarter(rl_pick_place.logged_scalars(run_dir)) == [
        0.0,
        0.5,
        1.0,
        1.0,
    ]


def test_timing_medians_and_the_simulators_milliseconds_per_world_step(tmp_path) -> None:
    # Three updates of 128 worlds x 120 steps (15,360 world steps each) whose simulator took 6.0, 9.0
    # and 7.5 s: 0.391, 0.586 and 0.488 ms per world step, median 7.5 / 15.36 = 0.48828125. The
    # update times 14, 10 and 12 s have the median 12.
    from vla_rl.config.schema import LoggerConfig
    from vla_rl.training.loggers import build_logger

    run_dir = tmp_path / "run"
    logger = build_logger(LoggerConfig(progress_bar=False, wandb_mode="disabled"), run_dir, 3, {})
    for step, (sim_s, update_s) in enumerate(((6.0, 14.0), (9.0, 10.0), (7.5, 12.0))):
        logger.log(
            {"perf/sim_time_s": sim_s, "rollout/env_steps": 15360.0, "train/update_time_s": update_s}, step
        )
    logger.close()
    timing = rl_pick_place.timing_medians(rl_pick_place.logged_scalars(run_dir))
    assert timing["sim_ms_per_world_step"] == pytest.approx(0.48828125)
    assert timing["sim_s"] == pytest.approx(7.5)
    assert timing["update_s"] == pytest.approx(12.0)
    assert "policy_s" not in timing  # not logged: not reported
