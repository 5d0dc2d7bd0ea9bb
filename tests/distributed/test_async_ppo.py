"""Asynchronous PPO from ``vla-rl train``'s config (``distributed.rollout_workers``,
``distributed.max_staleness``): consumed rollouts never lag the learner by more than the bound (staler
ones are dropped), the schedule gives the same run in-process and on Ray, and a resumed run goes on
exactly as one that never stopped."""

from __future__ import annotations

from pathlib import Path

import pytest

from vla_rl.config import ConfigError, compose_train_config
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.runner import Trainer

STEPS_PER_UPDATE = 8 * 16  # one worker's rollout: env.num_envs * algorithm.num_steps
OVERRIDES = [
    "env=reach",
    "env.num_envs=8",
    "env.num_threads=1",
    "env.max_episode_steps=24",  # episodes end (autoreset) inside the rollouts
    "algorithm.num_steps=16",
    "algorithm.num_minibatches=2",
    "algorithm.num_epochs=2",
    "policy.hidden_sizes=[32,32]",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "max_minutes=0",
    "eval.num_episodes=0",
    "distributed.env_worker_cpus=0",  # the test's Ray instance has 2 CPUs for everything
]


def _train(run_dir: Path, workers: int, max_staleness: int, updates: int = 6, *extra: str):
    cfg = compose_train_config(
        [
            *OVERRIDES,
            f"run_dir={run_dir}",
            f"distributed.rollout_workers={workers}",
            f"distributed.max_staleness={max_staleness}",
            f"total_env_steps={updates * STEPS_PER_UPDATE}",
            *extra,
        ]
    )
    trainer = Trainer(cfg)
    try:
        return trainer.train(), trainer
    finally:
        trainer.close()


def _comparable(history: list[dict[str, float]]) -> list[dict[str, float]]:
    return [{k: v for k, v in m.items() if not k.startswith("perf/")} for m in history]


@pytest.mark.parametrize(
    ("workers", "max_staleness", "expected_staleness", "expected_dropped"),
    [
        (1, 0, [0] * 6, 0),  # synchronous: each rollout uses the newest weights
        (2, 1, [0, 1, 1, 1, 1, 1], 0),  # two in flight: one version behind
        (2, 0, [0] * 6, 5),  # the bound forces every other rollout out
        (3, 1, [0, 1, 1, 1, 1, 1], 2),  # three in flight would lag 2 versions: those are dropped
    ],
)
def test_consumed_rollouts_respect_the_staleness_bound(
    tmp_path, workers, max_staleness, expected_staleness, expected_dropped
):
    result, _ = _train(tmp_path, workers, max_staleness)
    assert (result.iterations, result.env_steps) == (6, 6 * STEPS_PER_UPDATE)
    assert [int(m["async/staleness"]) for m in result.history] == expected_staleness
    assert int(result.history[-1]["async/dropped"]) == expected_dropped
    # Workers are taken back in start order: with no drops the updates cycle through them.
    if expected_dropped == 0:
        assert [int(m["async/worker"]) for m in result.history] == [k % workers for k in range(6)]
    assert all(m["train/policy_loss"] == m["train/policy_loss"] for m in result.history)  # no NaN
    assert any(m["rollout/episodes"] > 0 for m in result.history)


def test_a_resumed_run_goes_on_exactly(tmp_path):
    """The checkpoint holds the rollout still in flight and each worker's env and RNG stream, so
    stopping after 3 updates and resuming to 6 gives the uninterrupted run's metrics and weights."""
    straight, straight_trainer = _train(tmp_path / "straight", 2, 1)
    first, _ = _train(tmp_path / "split", 2, 1, 3)
    second, resumed = _train(tmp_path / "split", 2, 1, 6, f"resume={tmp_path / 'split'}")
    assert (first.iterations, second.iterations) == (3, 6)
    assert _comparable(first.history + second.history) == _comparable(straight.history)
    for name, value in resumed.policy.state_dict().items():
        assert value.equal(straight_trainer.policy.state_dict()[name]), name


@pytest.mark.slow
def test_ray_runs_the_same_asynchronous_schedule(tmp_path, ray_runtime):
    """Tolerance zero: the schedule is fixed by start order, not timing, and each worker samples
    from its own RNG stream wherever it runs."""
    local, local_trainer = _train(tmp_path / "local", 2, 1)
    remote, remote_trainer = _train(tmp_path / "ray", 2, 1, 6, "distributed.runtime=ray")
    assert _comparable(remote.history) == _comparable(local.history)
    for name, value in remote_trainer.policy.state_dict().items():
        assert value.equal(local_trainer.policy.state_dict()[name]), name


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            [*OVERRIDES, "distributed.env_workers=2"],
            "set distributed.env_workers=0 and distributed.trainer_ranks=0",
        ),
        ([*OVERRIDES, "distributed.max_staleness=-1"], "'distributed.max_staleness'"),
    ],
)
def test_bad_asynchronous_settings_name_the_key(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match="distributed") as error:
        compose_train_config([*overrides, f"run_dir={tmp_path}", "distributed.rollout_workers=2"])
    assert message in str(error.value)


def test_chunk_rl_refuses_rollout_workers(tmp_path):
    with pytest.raises(ConfigError, match="'distributed.rollout_workers'.*state PPO only"):
        compose_rl_config(["recipe=pi0_flow_sde_ppo", "policy.init_from=x", "distributed.rollout_workers=2"])
