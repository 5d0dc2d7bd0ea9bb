"""Chunk RL (the tiny flow policy's Flow-SDE PPO on ``reach``) with its worlds on 2 Ray env workers and
its update on 2 gloo trainer ranks follows the single-process run, and finishes when an env worker or
a trainer rank is killed mid-run."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from test_distributed_training import _crashing_worker
from tiny_chunk_rl import flow_policy_dir, overrides
from torch.distributed.tensor import DTensor

from vla_rl.distributed.chunk_ranks import ChunkRank, build_data_parallel_chunk
from vla_rl.distributed.remote_env import EnvWorker, build_training_env
from vla_rl.training.checkpoint import load_checkpoint
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer, RLResult

SPREAD = [
    "distributed.runtime=ray",
    "distributed.env_workers=2",  # 2 worlds each
    "distributed.trainer_ranks=2",
    "distributed.env_worker_cpus=0",  # the test's Ray instance has 2 CPUs for everything
    "distributed.trainer_cpus=0",
]
RTOL = ATOL = 1e-5
"""Measured over 3 updates: the gradient norm 1.2e-6 relative, the policy loss 7.6e-7 and the
explained variance 3.6e-7 absolute (small differences of terms of order 1, hence an absolute part),
the weights 6e-8 absolute. Each rank sums its half of a minibatch (its own matmul blocking) and the
halves' gradients are summed by gloo: float rounding in another order than one process's single sum,
carried on by the next rollouts' sampled chains. No reduction order makes that bit for bit; the
worlds are (env workers alone give the single-process run exactly)."""


def _train(
    run_dir: Path,
    init_from: Path,
    *extra: str,
    recipe: tuple[str, str] = ("pi0_flow_sde", "vla_ppo"),
    worker_cls: type = EnvWorker,
    rank_cls: type = ChunkRank,
) -> tuple[RLResult, ChunkRLTrainer]:
    """A 3-update run of ``recipe`` (its name and algorithm) for the tiny flow policy."""
    cfg = compose_rl_config([*overrides(run_dir, init_from, *recipe), "iterations=3", *extra])
    env = build_training_env(cfg.env, cfg.distributed, worker_cls=worker_cls)
    trainer = ChunkRLTrainer(cfg, env=env)
    try:
        if rank_cls is not ChunkRank:
            trainer.algorithm.close()
            trainer.algorithm = build_data_parallel_chunk(
                cfg, trainer.policy, init_from, trainer.runtime, rank_cls
            )
        return trainer.train(), trainer
    finally:
        trainer.close()


def single_process_optimizer_state(run_dir: Path, init_from: Path) -> dict:
    """The optimizer state a single-process run checkpoints after 2 updates (its layout)."""
    _train(run_dir, init_from, "iterations=2", "checkpoint_interval=2")
    return load_checkpoint(run_dir / "checkpoints" / "iter_000002").trainer_state["algorithm"]["optimizer"]


def assert_follows(
    single: RLResult, single_trainer: ChunkRLTrainer, other: RLResult, other_trainer: ChunkRLTrainer
) -> None:
    """``other``'s metrics (but timings) and final weights are ``single``'s within ``RTOL`` / ``ATOL``."""
    one, two = _comparable(single.history), _comparable(other.history)
    assert [sorted(m) for m in one] == [sorted(m) for m in two]
    for a, b in zip(one, two, strict=True):
        for key, value in a.items():
            assert math.isclose(b[key], value, rel_tol=RTOL, abs_tol=ATOL), (key, value, b[key])
    for name, value in single_trainer.policy.state_dict().items():
        torch.testing.assert_close(other_trainer.policy.state_dict()[name], value, rtol=RTOL, atol=ATOL)


def _comparable(history: list[dict[str, float]]) -> list[dict[str, float]]:
    """The metrics but timings."""
    return [
        {k: v for k, v in m.items() if not (k.startswith("perf/") or k.endswith("_time_s"))} for m in history
    ]


@pytest.mark.slow
def test_two_env_workers_and_two_trainer_ranks_train_like_one_process(tmp_path: Path, ray_runtime) -> None:
    init_from = flow_policy_dir(tmp_path)
    single, single_trainer = _train(tmp_path / "single", init_from)
    # The env workers alone (the update in this process) give the single-process run bit for bit.
    workers_only = [key for key in SPREAD if not key.startswith("distributed.trainer_ranks")]
    on_workers, _ = _train(tmp_path / "workers", init_from, *workers_only)
    assert _comparable(on_workers.history) == _comparable(single.history)
    spread, spread_trainer = _train(tmp_path / "spread", init_from, *SPREAD)
    assert spread.events == [] and spread.iterations == 3
    assert spread_trainer.algorithm.version == 3  # three weight versions synced, checksums checked
    assert "train/policy_loss" in single.history[0] and "train/value_loss" in single.history[0]
    assert_follows(single, single_trainer, spread, spread_trainer)
    assert [e["success_rate"] for e in spread.evaluations] == [e["success_rate"] for e in single.evaluations]


class ShardCheckingRank(ChunkRank):
    """A rank that checks, after each update, that it holds half of each parameter (FSDP2's
    ``DTensor`` shards: 1/2 of dim 0, rounded up)."""

    def update(self, batch, policy_state):
        result = super().update(batch, policy_state)
        for name, parameter in self.policy.named_parameters():
            assert isinstance(parameter, DTensor), name
            assert len(parameter.to_local()) == math.ceil(len(parameter) / 2) - self.rank * (
                len(parameter) % 2
            )
        return result


@pytest.mark.slow
def test_fsdp2_ranks_hold_half_the_policy_and_train_like_one_process(tmp_path: Path, ray_runtime) -> None:
    """``distributed.trainer_strategy=fsdp2``: the same updates as one process (the gradients
    averaged by a reduce-scatter instead of an all-reduce), the weights synced whole."""
    init_from = flow_policy_dir(tmp_path)
    single, single_trainer = _train(tmp_path / "single", init_from)
    sharded, sharded_trainer = _train(
        tmp_path / "fsdp2",
        init_from,
        *SPREAD,
        "distributed.trainer_strategy=fsdp2",
        rank_cls=ShardCheckingRank,
    )
    assert sharded.events == [] and sharded_trainer.algorithm.version == 3
    assert_follows(single, single_trainer, sharded, sharded_trainer)


@pytest.mark.slow
def test_grpo_on_env_workers_and_two_trainer_ranks_follows_one_process(tmp_path: Path, ray_runtime) -> None:
    """GRPO's grouped rollouts, half of each update's decisions drawn, 3 minibatches of uneven size
    whose shares differ between the ranks: the global means keep the single trainer's step."""
    init_from = flow_policy_dir(tmp_path)
    grpo = [
        "algorithm.group_size=2",
        "algorithm.keep_success_range=[0.0,1.0]",  # every group trains, whatever its success
        "algorithm.score=return_to_go",
        "algorithm.progress_shaping=10.0",  # rewards that differ between the worlds
        "algorithm.decision_fraction=0.5",
        "algorithm.num_minibatches=3",
    ]
    recipe = ("token_vla_grpo", "vla_grpo")
    single, single_trainer = _train(tmp_path / "single", init_from, *grpo, recipe=recipe)
    ranks, ranks_trainer = _train(tmp_path / "ranks", init_from, *grpo, *SPREAD, recipe=recipe)
    assert all(m["train/trained_decisions"] > 0 for m in single.history)
    assert_follows(single, single_trainer, ranks, ranks_trainer)


@pytest.mark.slow
def test_an_env_worker_killed_mid_run_is_replaced_and_the_run_finishes(tmp_path: Path, ray_runtime) -> None:
    # 2 decisions x 2 executed steps per update: a worker's 6th step is the second step of update 2's
    # second decision.
    worker_cls = _crashing_worker(tmp_path / "crashed", at_step=6)
    result, _ = _train(tmp_path / "run", flow_policy_dir(tmp_path), *SPREAD, worker_cls=worker_cls)
    assert result.iterations == 3
    assert len(result.events) == 1
    assert result.events[0].startswith("iteration 2: env worker ") and result.events[0].endswith(
        "died (ActorDiedError); replaced"
    )
    # The dead worker's 2 worlds lose that decision (left out of the update); the others are whole.
    assert [m.get("rollout/lost_steps", 0.0) for m in result.history] == [0.0, 2.0, 0.0]
    assert all(math.isfinite(m["train/policy_loss"]) for m in result.history)


def _crashing_rank(marker: Path, at_update: int) -> type:
    class CrashingChunkRank(ChunkRank):
        """Rank 1's process exits during its ``at_update``-th update, once (``marker`` records it)."""

        updates = 0

        def update(self, batch, policy_state):
            self.updates += 1
            if self.rank == 1 and self.updates == at_update and not marker.exists():
                marker.touch()
                os._exit(1)
            return super().update(batch, policy_state)

    return CrashingChunkRank


@pytest.mark.slow
def test_a_trainer_rank_killed_mid_run_restarts_the_ranks_from_the_last_checkpoint(
    tmp_path: Path, ray_runtime
) -> None:
    init_from = flow_policy_dir(tmp_path)
    budget = ["iterations=4", "checkpoint_interval=2"]
    straight, straight_trainer = _train(tmp_path / "straight", init_from, *SPREAD, *budget)
    rank_cls = _crashing_rank(tmp_path / "crashed", at_update=4)
    result, trainer = _train(tmp_path / "crash", init_from, *SPREAD, *budget, rank_cls=rank_cls)
    assert result.iterations == 4
    assert result.events == [
        "iteration 4: a trainer rank died (ActorDiedError); new trainer ranks restarted from checkpoint "
        "iter_000002 (iteration 2)"
    ]
    # Updates 3 and 4 were redone from the checkpoint of update 2 (policy folder, optimizer, each env
    # worker's simulator state, RNGs): the run is the uninterrupted one, bit for bit.
    assert _comparable(result.history) == _comparable(straight.history)
    for name, value in straight_trainer.policy.state_dict().items():
        assert torch.equal(trainer.policy.state_dict()[name], value), name


@pytest.mark.slow
def test_fsdp2_ranks_restart_from_a_checkpoint_of_their_gathered_state(tmp_path: Path, ray_runtime) -> None:
    """The checkpoint of sharded ranks holds the whole optimizer state in ``Optimizer.state_dict``'s
    layout; new sharded ranks load it and redo the lost updates as the uninterrupted run did."""
    init_from = flow_policy_dir(tmp_path)
    budget = ["iterations=4", "checkpoint_interval=2", "distributed.trainer_strategy=fsdp2"]
    straight, straight_trainer = _train(tmp_path / "straight", init_from, *SPREAD, *budget)
    optimizer = load_checkpoint(tmp_path / "straight" / "checkpoints" / "iter_000002").trainer_state[
        "algorithm"
    ]["optimizer"]
    single_process = single_process_optimizer_state(tmp_path / "single", init_from)
    assert [g["params"] for g in optimizer["param_groups"]] == [
        g["params"] for g in single_process["param_groups"]
    ]
    assert optimizer["state"].keys() == single_process["state"].keys()
    rank_cls = _crashing_rank(tmp_path / "crashed", at_update=4)
    result, trainer = _train(tmp_path / "crash", init_from, *SPREAD, *budget, rank_cls=rank_cls)
    assert result.events[0].startswith("iteration 4: a trainer rank died")
    assert _comparable(result.history) == _comparable(straight.history)
    for name, value in straight_trainer.policy.state_dict().items():
        assert torch.equal(trainer.policy.state_dict()[name], value), name


@pytest.mark.slow
def test_a_gpu_placement_from_the_config_puts_env_workers_and_trainer_ranks_on_their_gpus(
    tmp_path: Path, ray_runtime
) -> None:
    """Disaggregated on the 4 GPUs declared to the test's Ray: both env workers share GPU 0, GPU 1 is
    the inference role's (the policy samples in the training process), the ranks get GPUs 2 and 3."""
    placement = ["distributed.placement.mode=disaggregated", "distributed.placement.num_gpus=4"]
    cfg = compose_rl_config(
        [*overrides(tmp_path / "run", flow_policy_dir(tmp_path)), "iterations=1", *SPREAD, *placement]
    )
    trainer = ChunkRLTrainer(cfg)
    try:
        env_gpus = [worker.call("assigned_gpus").result() for worker in trainer.env.pool.workers]
        rank_gpus = [rank.call("assigned_gpus").result() for rank in trainer.algorithm.ranks]
        result = trainer.train()
    finally:
        trainer.close()
    assert result.iterations == 1
    assert len(env_gpus[0]) == 1 and env_gpus[0] == env_gpus[1]
    assert all(len(ids) == 1 for ids in rank_gpus) and rank_gpus[0] != rank_gpus[1]
    assert not set(env_gpus[0]) & {ids[0] for ids in rank_gpus}


def test_each_rank_takes_a_contiguous_share_and_a_rank_without_rows_a_masked_out_one() -> None:
    from vla_rl.distributed.chunk_ranks import DataParallelChunkUpdate
    from vla_rl.rollout.flat_batch import FlatBatch

    batch = FlatBatch({"proprio": torch.arange(3.0)[:, None]}, {}, {"valid": torch.ones(3, dtype=torch.bool)})
    update = DataParallelChunkUpdate()
    update.world_size = 2
    shares = []
    for rank in range(2):
        update.rank = rank
        shares.append(update.local_rows(batch).obs["proprio"].flatten().tolist())
    assert shares == [[0.0, 1.0], [2.0]]
    update.world_size, update.rank = 4, 3  # 3 rows for 4 ranks: rank 3 has none
    placeholder = update.local_rows(batch)
    assert len(placeholder) == 1 and not placeholder.tensors["valid"].any()
