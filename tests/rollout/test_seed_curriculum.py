import pytest
import torch

from vla_rl.rollout.seed_curriculum import SeedCurriculum


def test_update_is_an_exponential_moving_average_and_sets_the_weights():
    curriculum = SeedCurriculum(pool_size=3, seed=0, floor=0.1, momentum=0.5)
    curriculum.update([0, 2], [1.0, 0.0])
    torch.testing.assert_close(curriculum.success, torch.tensor([0.75, 0.5, 0.25]))
    torch.testing.assert_close(curriculum.weights(), torch.tensor([0.35, 0.6, 0.85]))


def test_solved_states_are_drawn_rarely():
    curriculum = SeedCurriculum(pool_size=2, seed=0, floor=0.1, momentum=0.0)
    curriculum.update([0, 1], [1.0, 0.0])  # seed 0 solved (weight 0.1), seed 1 failing (1.1)
    draws = curriculum.draw(2000)
    share_of_solved = draws.count(0) / len(draws)
    assert share_of_solved == pytest.approx(0.1 / 1.2, abs=0.03)


def test_pools_of_different_run_seeds_do_not_overlap_and_state_round_trips():
    first, second = SeedCurriculum(4, seed=0), SeedCurriculum(4, seed=1)
    assert not set(first.draw(4)) & set(second.draw(4))
    first.update([first.draw(1)[0]], [1.0])
    copy = SeedCurriculum(4, seed=0)
    copy.load_state_dict(first.state_dict())
    assert copy.draw(3) == first.draw(3)
