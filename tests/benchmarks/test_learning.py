"""The learning benchmark's jobs are valid training configs."""

import pytest

from benchmarks.learning import JOBS
from vla_rl.config import compose_train_config


@pytest.mark.parametrize("name", sorted(JOBS))
def test_each_job_composes(name: str) -> None:
    compose_train_config(list(JOBS[name].overrides))


def test_pixel_job_runs_exactly_the_updates_its_learning_rate_decays_over() -> None:
    cfg = compose_train_config(list(JOBS["reach_pixels"].overrides))
    updates = cfg.total_env_steps / (cfg.env.num_envs * cfg.algorithm.num_steps)
    assert cfg.algorithm.lr_schedule == "linear"
    assert updates == cfg.algorithm.lr_decay_iterations == 600
