"""The RLPD vs PPO benchmark's bookkeeping, on curves worked out by hand."""

from __future__ import annotations

from benchmarks.rlpd_vs_ppo import steps_to, success_at, summarise

PPO = [(40_960, 0.0), (81_920, 0.5), (122_880, 0.8125), (163_840, 0.75)]
RLPD = [(4_000, 0.25), (8_000, 0.84375), (12_000, 0.9)]


def test_steps_to_is_the_first_evaluation_at_or_above_the_target():
    assert steps_to(PPO, 0.8) == 122_880
    assert steps_to(RLPD, 0.8) == 8_000
    assert steps_to(RLPD, 0.95) is None


def test_success_at_is_the_last_evaluation_at_or_before_the_budget():
    assert success_at(PPO, 100_000) == 0.5
    assert success_at(PPO, 122_880) == 0.8125
    assert success_at(RLPD, 3_999) is None


def test_summary_gives_the_ratio_of_env_steps_to_the_target():
    results = {
        "machine": "a test machine",
        "rlpd_env_steps": 12_000,
        "tasks": {
            "push": {"rlpd": {"curve": RLPD, "wall_s": 600.0}, "ppo": {"curve": PPO, "wall_s": 60.0}},
            "lift": {
                "rlpd": {"curve": [(12_000, 0.5)], "wall_s": 60.0},
                "ppo": {"curve": PPO, "wall_s": 60.0},
            },
        },
    }
    table = summarise(results)
    # push: 8,000 / 122,880 = 0.065; lift: RLPD never reached 80 % within its 12,000 steps.
    assert "| push | RLPD | 8,000 | 90.0 % | 90.0 % (12,000) | 10.0 min | 0.065 |" in table
    assert "| push | PPO | 122,880 | n/a |" in table
    assert "| lift | RLPD | not reached | 50.0 % | 50.0 % (12,000) | 1.0 min | > 0.098 |" in table


def test_a_finished_run_is_found_in_its_log(tmp_path):
    from benchmarks.rlpd_vs_ppo import finished_minutes

    log = tmp_path / "run.log"
    assert finished_minutes(log) is None
    log.write_text("INFO plan: 1000 updates\n")
    assert finished_minutes(log) is None
    log.write_text("trained 12000 updates, 48000 env steps in 31.25 min (total_env_steps); checkpoint: c\n")
    assert finished_minutes(log) == 31.25
