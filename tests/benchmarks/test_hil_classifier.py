"""The HIL benchmark's choice of the classifier's episode rule, checked on episodes worked out by hand."""

from __future__ import annotations

from benchmarks.hil_classifier import choose_episode_rule, fires


def test_a_rule_fires_on_a_run_of_periods_at_the_threshold() -> None:
    assert fires([0.6, 0.1, 0.6], 0.5, 2) is False  # two above, never in a row
    assert fires([0.1, 0.6, 0.6], 0.5, 2) is True
    assert fires([0.5], 0.5, 1) is True  # at the threshold counts


def test_the_rule_with_the_best_episode_accuracy_is_chosen() -> None:
    probabilities = [[0.1, 0.6, 0.95, 0.97], [0.6, 0.6, 0.1, 0.2], [0.92, 0.1, 0.1]]
    succeeded = [True, False, False]
    rule = choose_episode_rule(probabilities, succeeded, thresholds=(0.5, 0.9), periods=(1, 2))
    # 0.5 x 1: all three fire (1/3); 0.5 x 2: the first two (2/3); 0.9 x 1: the first and third (2/3);
    # 0.9 x 2: only the first, the one success (3/3).
    accuracy = {(r["threshold"], r["consecutive_steps"]): r["episode_accuracy"] for r in rule["grid"]}
    assert accuracy == {(0.5, 1): 1 / 3, (0.5, 2): 2 / 3, (0.9, 1): 2 / 3, (0.9, 2): 1.0}
    assert (rule["threshold"], rule["consecutive_steps"], rule["episodes"]) == (0.9, 2, 3)
    assert rule["episode_false_positives"] == 0


def test_ties_go_to_fewer_false_positives_then_fewer_periods() -> None:
    probabilities = [[0.95], [0.6, 0.6], [0.6]]
    succeeded = [True, True, False]
    rule = choose_episode_rule(probabilities, succeeded, thresholds=(0.5, 0.9), periods=(1, 2))
    # 0.5 x 1: 2/3 with a false positive; 0.5 x 2 and 0.9 x 1: 2/3, none (a missed success each);
    # 0.9 x 2: 1/3. Of the two without a false positive, 0.9 x 1 needs fewer periods.
    false_positives = {
        (r["threshold"], r["consecutive_steps"]): r["episode_false_positives"] for r in rule["grid"]
    }
    assert false_positives == {(0.5, 1): 1, (0.5, 2): 0, (0.9, 1): 0, (0.9, 2): 0}
    assert (rule["threshold"], rule["consecutive_steps"]) == (0.9, 1)
    assert rule["episode_accuracy"] == 2 / 3
