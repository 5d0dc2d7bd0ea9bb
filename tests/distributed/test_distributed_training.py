"""Training with env workers: the in-process and Ray runtimes give the same run, and a worker that
dies mid-rollout is replaced while training finishes without re-running the lost step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vla_rl.config import compose_train_config
from vla_rl.distributed.remote_env import EnvWorker, build_training_env
from vla_rl.training.runner import Trainer

STEPS_PER_ITERATION = 8 * 12
OVERRIDES = [
    "env=push",
    "env.num_envs=8",
    "env.num_threads=1",
    "env.max_episode_steps=20",  # episodes end (autoreset) inside every iteration
    "algorithm.num_steps=12",
    "algorithm.num_minibatches=2",
    "algorithm.num_epochs=2",
    "policy.hidden_sizes=[32,32]",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "max_minutes=0",
    f"total_env_steps={3 * STEPS_PER_ITERATION}",
    "distributed.env_worker_cpus=0",  # the test's Ray instance has 2 CPUs for everything
]


def _train(run_dir: Path, *extra: str, worker_cls: type = EnvWorker):
    cfg = compose_train_config([*OVERRIDES, f"run_dir={run_dir}", *extra])
    trainer = Trainer(cfg, env=build_training_env(cfg.env, cfg.distributed, worker_cls=worker_cls))
    try:
        return trainer.train(), trainer
    finally:
        trainer.close()


def _comparable(history: list[dict[str, float]]) -> list[dict[str, float]]:
    return [{k: v for k, v in m.items() if not k.startswith("perf/")} for m in history]


@pytest.mark.slow
def test_in_process_and_ray_runtimes_train_the_same_run(tmp_path: Path, ray_runtime) -> None:
    """Same seed -> the same metrics and weights to the last bit (the tolerance is zero): the policy
    runs in the driver either way and each worker's physics is deterministic."""
    local, local_trainer = _train(tmp_path / "local", "env.pipeline_stages=4")  # no workers
    runs = {
        runtime: _train(
            tmp_path / runtime,
            f"distributed.runtime={runtime}",
            "distributed.env_workers=2",
            "env.pipeline_stages=2",
        )
        for runtime in ("inprocess", "ray")
    }
    assert any(m["rollout/episodes"] > 0 for m in local.history)
    for result, trainer in runs.values():
        assert result.events == []
        assert _comparable(result.history) == _comparable(local.history)
        for name, value in trainer.policy.state_dict().items():
            assert value.equal(local_trainer.policy.state_dict()[name]), name


def _claim(marker: Path) -> bool:
    """True for the one caller that creates ``marker`` (atomic: workers race for it)."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _crashing_worker(marker: Path, at_step: int) -> type:
    class CrashingEnvWorker(EnvWorker):
        """Dies (its process exits) at its ``at_step``-th step call if it is the first to claim
        ``marker``: one worker dies, once."""

        calls = 0

        def run(self, stage, method, *args, **kwargs):
            if method == "step":
                self.calls += 1
                if self.calls == at_step and _claim(marker):
                    os._exit(1)
            return super().run(stage, method, *args, **kwargs)

    return CrashingEnvWorker


@pytest.mark.slow
def test_env_worker_killed_mid_training_is_replaced_and_training_finishes(
    tmp_path: Path, ray_runtime
) -> None:
    worker_cls = _crashing_worker(tmp_path / "crashed", at_step=30)  # 2 stages: step 15 of iteration 2
    result, _ = _train(
        tmp_path / "run",
        "distributed.runtime=ray",
        "distributed.env_workers=2",
        "env.pipeline_stages=2",
        worker_cls=worker_cls,
    )
    assert result.iterations == 3 and result.env_steps == 3 * STEPS_PER_ITERATION
    # The first worker to reach its 30th step dies (the marker spares the other and the replacement).
    assert len(result.events) == 1 and result.events[0].endswith("died (ActorDiedError); replaced")
    lost = [m["rollout/lost_steps"] for m in result.history]
    # The dead worker held 2 stages x 2 worlds; their one step in flight is dropped, never re-run.
    assert lost == [0.0, 4.0, 0.0]
    assert all(m["train/policy_loss"] == m["train/policy_loss"] for m in result.history)  # not NaN


@pytest.mark.slow
def test_a_run_on_env_workers_resumes_exactly(tmp_path: Path) -> None:
    """Checkpoints hold each worker stage's simulator state, so a resumed run continues bit for bit."""
    workers = ["distributed.env_workers=2", "env.pipeline_stages=2"]
    straight, _ = _train(tmp_path / "straight", *workers)
    _train(tmp_path / "split", *workers, f"total_env_steps={2 * STEPS_PER_ITERATION}")
    resumed, _ = _train(tmp_path / "split", *workers, f"resume={tmp_path / 'split'}")
    assert resumed.iterations == 3 and len(resumed.history) == 1
    assert _comparable(resumed.history) == _comparable(straight.history[2:])


@pytest.mark.slow
def test_placement_from_the_config_puts_env_workers_and_trainer_ranks_on_their_gpus(
    tmp_path: Path, ray_runtime
):
    """Disaggregated on the 4 GPUs declared to the test's Ray: env workers share GPU 0 (half each),
    GPU 1 is the inference role's (the driver acts here), trainer ranks get GPUs 2 and 3."""
    cfg = compose_train_config(
        [
            *OVERRIDES,
            f"run_dir={tmp_path}",
            "distributed.runtime=ray",
            "distributed.env_workers=2",
            "distributed.trainer_ranks=2",
            "distributed.trainer_cpus=0",
            "distributed.placement.mode=disaggregated",
            "distributed.placement.num_gpus=4",
        ]
    )
    trainer = Trainer(cfg)
    try:
        env_gpus = [worker.call("assigned_gpus").result() for worker in trainer.env.pool.workers]
        trainer_gpus = [rank.call("assigned_gpus").result() for rank in trainer.algorithm.ranks]
        result = trainer.train()
    finally:
        trainer.close()
    assert result.iterations == 3
    assert len(env_gpus[0]) == 1 and env_gpus[0] == env_gpus[1]
    assert all(len(ids) == 1 for ids in trainer_gpus) and trainer_gpus[0] != trainer_gpus[1]
    assert not set(env_gpus[0]) & {ids[0] for ids in trainer_gpus}
