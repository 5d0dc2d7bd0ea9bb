"""PPO's update on two DDP trainer ranks (gloo, Ray actors) follows the single-process run."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from test_distributed_training import OVERRIDES, STEPS_PER_ITERATION, _comparable, _train

from vla_rl.config import compose_train_config
from vla_rl.distributed.ppo_ranks import DataParallelPPO, PPORank
from vla_rl.distributed.runtime import Resources
from vla_rl.training.runner import Trainer

RTOL = 1e-5
"""Measured: 2.6e-6 on the metrics, 1.2e-7 absolute on the weights. Two shares' gradients averaged
sum in another order than one mean: float rounding, which the next rollouts' sampled actions carry on."""


@pytest.mark.slow
def test_two_ddp_ranks_train_like_one_process(tmp_path: Path, ray_runtime) -> None:
    single, single_trainer = _train(tmp_path / "single")
    ranks, ranks_trainer = _train(
        tmp_path / "ranks",
        "distributed.runtime=ray",
        "distributed.trainer_ranks=2",
        "distributed.trainer_cpus=0",
    )
    assert ranks_trainer.algorithm.version == 3
    a, b = _comparable(single.history), _comparable(ranks.history)
    assert [sorted(m) for m in a] == [sorted(m) for m in b]
    for one, two in zip(a, b, strict=True):
        for key, value in one.items():
            assert math.isclose(two[key], value, rel_tol=RTOL, abs_tol=1e-6), (key, value, two[key])
    for name, value in single_trainer.policy.state_dict().items():
        torch.testing.assert_close(ranks_trainer.policy.state_dict()[name], value, rtol=RTOL, atol=1e-6)


def test_more_than_one_rank_needs_ray() -> None:
    from vla_rl.config import ConfigError, compose_train_config

    with pytest.raises(ConfigError, match="distributed.trainer_ranks.*needs distributed.runtime=ray"):
        compose_train_config([*OVERRIDES, "distributed.trainer_ranks=2"])


def test_state_ppo_ranks_are_not_sharded() -> None:
    from vla_rl.config import ConfigError, compose_train_config

    with pytest.raises(ConfigError, match="distributed.trainer_strategy.*ddp"):
        compose_train_config([*OVERRIDES, "distributed.trainer_strategy=fsdp2"])


def _crashing_rank(marker: Path, at_update: int) -> type:
    class CrashingPPORank(PPORank):
        """Rank 1's process exits during its ``at_update``-th update, once (``marker`` records it)."""

        updates = 0

        def update(self, rollout, policy_state):
            self.updates += 1
            if self.rank == 1 and self.updates == at_update and not marker.exists():
                marker.touch()
                os._exit(1)
            return super().update(rollout, policy_state)

    return CrashingPPORank


@pytest.mark.slow
def test_a_dead_trainer_rank_restarts_the_run_from_its_last_checkpoint(tmp_path: Path, ray_runtime) -> None:
    ranks = ["distributed.runtime=ray", "distributed.trainer_ranks=2", "distributed.trainer_cpus=0"]
    budget = [f"total_env_steps={4 * STEPS_PER_ITERATION}", "checkpoint_interval=2"]
    straight, _ = _train(tmp_path / "straight", *ranks, *budget)

    cfg = compose_train_config([*OVERRIDES, *ranks, *budget, f"run_dir={tmp_path / 'crash'}"])
    trainer = Trainer(cfg)
    trainer.algorithm.close()
    trainer.algorithm = DataParallelPPO(
        ray_runtime,
        cfg,
        trainer.policy,
        trainer.env,
        world_size=2,
        resources=Resources(num_cpus=0),
        rank_cls=_crashing_rank(tmp_path / "crashed", at_update=3),
    )
    try:
        result = trainer.train()
    finally:
        trainer.close()
    assert result.iterations == 4
    assert result.events == [
        "iteration 3: a trainer rank died (ActorDiedError); new trainer ranks restarted from checkpoint "
        "iter_000002 (iteration 2)"
    ]
    # Iteration 3 was redone from the checkpoint of iteration 2 (policy, optimizer, env, RNGs): the
    # run is the uninterrupted one, bit for bit.
    assert _comparable(result.history) == _comparable(straight.history)
