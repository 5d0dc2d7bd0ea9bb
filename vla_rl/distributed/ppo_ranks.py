"""PPO's update on data-parallel trainer ranks (DDP over gloo on CPUs, NCCL on GPUs).

The driver collects a rollout as usual; ``DataParallelPPO.update`` ships it with the driver's
policy state (weights and observation statistics) to ``world_size`` ``PPORank`` workers. Every rank
draws the same minibatch permutation (same seeded generator), normalises the whole minibatch's
advantages, takes its contiguous share and computes the losses through a DDP-wrapped module, so the
averaged gradient is the one a single trainer computes on the whole minibatch; the KL that adapts
the learning rate and the reported metrics are averaged over ranks. The weight sync after each
update (checksums, versions) and the restart after a dead rank are ``data_parallel``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from vla_rl.algorithms.ppo import PPO, PPOLosses
from vla_rl.algorithms.surrogate import normalize_advantages
from vla_rl.config.schema import TrainConfig
from vla_rl.distributed.data_parallel import DataParallelAlgorithm, DataParallelRank
from vla_rl.distributed.layout import worker_resources
from vla_rl.distributed.process_group import init_trainer_rank, mean_over_ranks, shard_batch
from vla_rl.distributed.runtime import Resources, Runtime
from vla_rl.envs.base import BatchedEnv, env_spec
from vla_rl.policies.base import ActorCriticPolicy
from vla_rl.rollout.buffer import Minibatch, RolloutBuffer
from vla_rl.training.components import build_learner


class _PPOLoss(torch.nn.Module):
    """The policy with PPO's losses as its forward, so DDP sees every use of the parameters."""

    def __init__(self, ppo: PPO) -> None:
        super().__init__()
        self.policy = ppo.policy
        self._ppo = ppo

    def forward(self, batch: Minibatch) -> PPOLosses:
        return self._ppo.compute_losses(batch, normalize_advantages=False)


class ShardedPPO(PPO):
    """PPO whose gradient steps run on this rank's share of each minibatch (DDP averages them)."""

    def __init__(self, policy: ActorCriticPolicy, cfg: Any, rank: int, world_size: int) -> None:
        super().__init__(policy, cfg)
        self.rank, self.world_size = rank, world_size
        self.loss_module = DistributedDataParallel(_PPOLoss(self))

    def _minibatch_losses(self, batch: Minibatch) -> PPOLosses:
        if self.cfg.normalize_advantages:
            # Over the whole minibatch's valid transitions, as a single trainer does before the losses.
            batch = {**batch, "advantages": normalize_advantages(batch["advantages"], batch["valid"])}
        return self.loss_module(shard_batch(batch, self.rank, self.world_size))

    def _metric(self, value: torch.Tensor) -> float:
        return mean_over_ranks(value)


class PPORank(DataParallelRank):
    """One trainer rank: a policy replica, a rollout buffer and ``ShardedPPO``."""

    def __init__(self, cfg: TrainConfig, spec: dict[str, Any], rank: int, world_size: int) -> None:
        torch.set_num_threads(cfg.torch_num_threads)
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        device = "cuda" if torch.cuda.is_available() else "cpu"  # the GPU Ray gave this rank, if any
        self.policy, self.buffer, _ = build_learner(
            cfg,
            spec["observation_space"],
            spec["action_space"],
            spec["num_envs"],
            device,
            spec["action_scale"],
        )
        self.algorithm: ShardedPPO | None = None

    def join(self, address: Any) -> None:
        init_trainer_rank(address, self.rank, self.world_size)
        self.algorithm = ShardedPPO(self.policy, self.cfg.algorithm, self.rank, self.world_size)
        self.algorithm.generator.manual_seed(self.cfg.seed)  # the driver's PPO starts from the same seed

    def receive(self, rollout: dict[str, Any]) -> RolloutBuffer:
        self.buffer.load(rollout)
        return self.buffer


class DataParallelPPO(DataParallelAlgorithm):
    """PPO's algorithm interface with the update on ``world_size`` ``PPORank``s."""

    def __init__(
        self,
        runtime: Runtime,
        cfg: TrainConfig,
        policy: ActorCriticPolicy,
        env: BatchedEnv,
        world_size: int,
        resources: Resources | Sequence[Resources] | None = None,
        rank_cls: type = PPORank,
    ) -> None:
        """``resources``: one for all ranks, or one per rank."""
        self.cfg = cfg
        rank_args = (cfg, env_spec(env))
        host = cfg.distributed.rendezvous_host
        super().__init__(runtime, policy, rank_cls, rank_args, world_size, resources, host)

    def export(self, buffer: RolloutBuffer) -> dict[str, Any]:
        return buffer.export()


def build_data_parallel_ppo(
    cfg: TrainConfig, policy: ActorCriticPolicy, env: BatchedEnv, runtime: Runtime
) -> DataParallelPPO:
    """PPO on ``cfg.distributed.trainer_ranks`` ranks of ``runtime``, placed as the config says."""
    dist_cfg = cfg.distributed
    resources = worker_resources(runtime, dist_cfg, "trainer", dist_cfg.trainer_ranks, dist_cfg.trainer_cpus)
    return DataParallelPPO(runtime, cfg, policy, env, dist_cfg.trainer_ranks, resources)
