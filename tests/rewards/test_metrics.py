"""Reward-model quality measures against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from vla_rl.rewards.metrics import auroc, remaining_path_progress, spearman, true_progress


def test_auroc_counts_correctly_ordered_pairs() -> None:
    # Positives {0.35, 0.8} against negatives {0.1, 0.4}: 0.35 > 0.1, 0.35 < 0.4, 0.8 > both -> 3 / 4.
    assert auroc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1])) == pytest.approx(0.75)
    assert auroc(np.array([0.5, 0.5]), np.array([0, 1])) == pytest.approx(0.5)  # a tie counts half
    with pytest.raises(ValueError, match="both positive and negative"):
        auroc(np.array([0.2, 0.3]), np.array([1, 1]))


def test_spearman_on_ranks() -> None:
    # Ranks [1, 2, 3, 4] and [1, 2, 4, 3]: sum d^2 = 2, rho = 1 - 6 * 2 / (4 * 15) = 0.8.
    assert spearman(np.array([1, 2, 3, 4]), np.array([10, 20, 40, 30])) == pytest.approx(0.8)


def test_true_progress_of_reach_from_the_privileged_state() -> None:
    # reach's privileged state: target_pos (3), tcp_to_target (3). Episode 0 starts 0.2 m away.
    tcp_to_target = np.array([[0.2, 0, 0], [0.1, 0, 0], [0, 0, 0], [0, 0.3, 0], [0, 0.4, 0], [0, 0.1, 0]])
    privileged = np.concatenate([np.zeros((6, 3)), tcp_to_target], axis=1)
    progress = true_progress("reach", privileged, np.array([0, 0, 0, 1, 1, 1]))
    # Episode 1 starts 0.3 m away; moving further (0.4 m) is clipped to 0 progress.
    np.testing.assert_allclose(progress, [0, 0.5, 1, 0, 0, 2 / 3])
    with pytest.raises(ValueError, match="no goal distance"):
        true_progress("lift", privileged, np.zeros(6))


def test_remaining_path_of_push_adds_the_gripper_to_cube_and_cube_to_target_legs() -> None:
    # push's privileged state: cube_pos (3), target_xy (2), tcp_to_cube (3), cube_to_target_xy (2).
    # Frames: gripper 0.3 m from the cube, cube 0.1 m from the target (path 0.4 m); gripper at the
    # cube (path 0.1 m); cube pushed to the target (path 0); the gripper moved off 0.1 m with the
    # cube still 0.1 m from the target (path 0.2 m).
    tcp_to_cube = np.array([[0.3, 0, 0], [0, 0, 0], [0, 0, 0], [0.1, 0, 0]])
    cube_to_target = np.array([[0.1, 0], [0.1, 0], [0, 0], [0.1, 0]])
    privileged = np.concatenate([np.zeros((4, 5)), tcp_to_cube, cube_to_target], axis=1)
    progress = remaining_path_progress("push", privileged, np.zeros(4))
    np.testing.assert_allclose(progress, [0, 0.75, 1, 0.5])
    # The evaluation's true progress counts the cube's leg only: 0, 0, 1, 0.
    np.testing.assert_allclose(true_progress("push", privileged, np.zeros(4)), [0, 0, 1, 0])
    with pytest.raises(ValueError, match="no remaining path"):
        remaining_path_progress("lift", privileged, np.zeros(4))
