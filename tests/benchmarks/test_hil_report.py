"""The HIL benchmark's episode counts (``benchmarks.hil_report``), on episode lists worked out by hand."""

from __future__ import annotations

from typing import Any

from benchmarks.hil_report import TRAILING, episode_summary, first_reaching, unwatched_summary


def episode(success: bool, intervention_steps: int = 0, watched: bool | None = None) -> dict[str, Any]:
    return {
        "sim_success": success,
        "success": success,
        "intervention_steps": intervention_steps,
        "steps": 10,
        "held_steps": 0,
        "watched": watched,
    }


def test_the_trailing_window_reaches_the_target_at_its_sixteenth_success() -> None:
    assert TRAILING == 20
    flags = [False] * 4 + [True] * 16  # 16 of the first 20: exactly 80 %
    assert first_reaching(flags) == 20
    assert first_reaching([False] * 5 + [True] * 15 + [False, True]) == 22  # 16 of episodes 3-22
    assert first_reaching([True] * 19) is None  # fewer than 20 episodes


def test_unwatched_episodes_count_alone_and_name_the_session_episode() -> None:
    """Episodes alternate watched / unwatched. The unwatched ones (session episodes 2, 4, ..., 44)
    succeed from their 5th on, so their 20th (session episode 40) closes a window of 16 successes."""
    episodes = [episode(True, 5, True) if n % 2 else episode(n >= 10, 0, False) for n in range(1, 45)]
    unwatched = unwatched_summary(episodes)
    assert unwatched["unwatched_episodes"] == 22
    assert unwatched["unwatched_sim_success_rate"] == 18 / 22
    assert unwatched["first_episode_trailing_80_unwatched"] == 40
    summary = episode_summary(episodes)
    assert summary["first_episode_trailing_80"] == 20  # all: 16 of 20 by episode 20 (10 + 6 even >= 10)
    assert summary["first_episode_trailing_80_unassisted"] is None  # half the episodes were taken over


def test_sessions_without_watching_draws_have_no_unwatched_episodes() -> None:
    summary = unwatched_summary([episode(True), episode(False, 3, True)])
    assert summary == {
        "unwatched_episodes": 0,
        "unwatched_sim_success_rate": None,
        "first_episode_trailing_80_unwatched": None,
    }
