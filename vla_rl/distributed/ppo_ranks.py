"""PPO's update on data-parallel trainer ranks (DDP over gloo on CPUs, NCCL on GPUs).

The driver collects a rollout as usual; ``DataParallelPPO.update`` ships it with the driver's
policy state (weights and observation statistics) to ``world_size`` ``PPORank`` workers. Every rank
draws the same minibatch permutation (same seeded generator), normalises the whole minibatch's
advantages, takes its contiguous share and computes the losses through a DDP-wrapped module, so the
averaged gradient is the one a single trainer computes on the whole minibatch; the KL that adapts
the learning rate and the reported metrics are averaged over ranks. Afterwards every rank reports
the checksum of its weights (they must agree) and rank 0 returns them, as the next version, to the
driver's policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from vla_rl.algorithms.ppo import PPO, PPOLosses
from vla_rl.algorithms.surrogate import normalize_advantages
from vla_rl.config.schema import TrainConfig
from vla_rl.distributed.layout import worker_resources
from vla_rl.distributed.process_group import GroupMember, init_trainer_rank, mean_over_ranks, shard_batch
from vla_rl.distributed.runtime import Resources, Runtime, WorkerHandle
from vla_rl.distributed.weights import cpu_state, state_checksum
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


class PPORank(GroupMember):
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
        self.ppo: ShardedPPO | None = None

    def join(self, address: Any) -> None:
        init_trainer_rank(address, self.rank, self.world_size)
        self.ppo = ShardedPPO(self.policy, self.cfg.algorithm, self.rank, self.world_size)
        self.ppo.generator.manual_seed(self.cfg.seed)  # the driver's PPO starts from the same seed

    def update(
        self, rollout: dict[str, Any], policy_state: dict[str, torch.Tensor]
    ) -> tuple[dict[str, float], dict[str, torch.Tensor] | None, str]:
        """(metrics, the new policy state on rank 0 else None, the checksum of this rank's weights)."""
        self.policy.load_state_dict(policy_state)
        self.buffer.load(rollout)
        metrics = self.ppo.update(self.buffer)
        state = cpu_state(self.policy)
        return metrics, state if self.rank == 0 else None, state_checksum(state)

    def state_dict(self) -> dict[str, Any]:
        return self.ppo.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ppo.load_state_dict(state)


class DataParallelPPO:
    """The algorithm interface of ``PPO`` (``update``, ``state_dict``, ``load_state_dict``) with the
    update on ``world_size`` trainer ranks; the driver's ``policy`` receives each new version."""

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
        self.spec = env_spec(env)
        self.runtime, self.cfg, self.policy = runtime, cfg, policy
        self.world_size, self.rank_cls = world_size, rank_cls
        self.resources = list(resources) if isinstance(resources, Sequence) else [resources] * world_size
        self.death_errors = runtime.worker_death_errors()
        """What ``update`` raises when a rank died; the trainer then calls ``restart``."""
        self.ranks: list[WorkerHandle] = []
        self._start()
        self.version = 0
        """Updates applied to the driver's policy."""

    def _start(self) -> None:
        self.ranks = [
            self.runtime.spawn(self.rank_cls, self.cfg, self.spec, r, self.world_size, resources=resources)
            for r, resources in enumerate(self.resources)
        ]
        address = self.ranks[0].call("rendezvous", self.cfg.distributed.rendezvous_host).result()
        self.runtime.gather([rank.call("join", address) for rank in self.ranks])

    def restart(self) -> None:
        """A new group of ranks (after one died); the caller loads the checkpoint to go on from."""
        self.close()
        self._start()

    def update(self, buffer: RolloutBuffer) -> dict[str, float]:
        rollout, state = self.runtime.share(buffer.export()), self.runtime.share(cpu_state(self.policy))
        results = self.runtime.gather_group([rank.call("update", rollout, state) for rank in self.ranks])
        checksums = [checksum for _, _, checksum in results]
        if len(set(checksums)) != 1:
            raise RuntimeError(
                f"trainer ranks hold different weights after an update: {[c[:12] for c in checksums]}"
            )
        metrics, new_state, _ = results[0]
        self.policy.load_state_dict(new_state)
        if state_checksum(cpu_state(self.policy)) != checksums[0]:
            raise RuntimeError("the driver's policy does not hold the trainer ranks' weights")
        self.version += 1
        return metrics

    def state_dict(self) -> dict[str, Any]:
        return self.ranks[0].call("state_dict").result()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.runtime.gather([rank.call("load_state_dict", state) for rank in self.ranks])

    def close(self) -> None:
        self.runtime.stop_all(self.ranks, "leave", timeout_s=10.0)
        self.ranks = []


def build_data_parallel_ppo(
    cfg: TrainConfig, policy: ActorCriticPolicy, env: BatchedEnv, runtime: Runtime
) -> DataParallelPPO:
    """PPO on ``cfg.distributed.trainer_ranks`` ranks of ``runtime``, placed as the config says."""
    dist_cfg = cfg.distributed
    resources = worker_resources(runtime, dist_cfg, "trainer", dist_cfg.trainer_ranks, dist_cfg.trainer_cpus)
    return DataParallelPPO(runtime, cfg, policy, env, dist_cfg.trainer_ranks, resources)
