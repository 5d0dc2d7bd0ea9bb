"""Chunk RL's update (chunk PPO, GRPO; token VLAs and flow policies) on data-parallel trainer ranks.

Every ``ChunkRank`` loads the policy as the training process did (``load_rl_learner``: the same
folder and config, frozen parameters, reference policy), so the folder must be readable where the
ranks run. Each update it receives the batch (and the driver's weights if it may not hold them:
``data_parallel``) and runs the algorithm's own update: advantages, the minibatch order (its
generator starts from the same seed) and the recomputed log-probabilities are the same on every
rank, taken over the whole batch; then, per gradient step, each rank computes the losses of its
contiguous share of the minibatch's rows (``DataParallelChunkUpdate``). A loss term's mean divides
by the count of entries over every rank's rows, and one all-reduce after each backward pass averages
the gradients before they are clipped, so the step is the single trainer's up to float summation
order. The annealed exploration of a flow policy is set per update from the update counter, as the
driver sets it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from vla_rl.algorithms.registry import algorithm_class
from vla_rl.distributed.data_parallel import DataParallelAlgorithm, DataParallelRank
from vla_rl.distributed.layout import worker_resources
from vla_rl.distributed.process_group import RendezvousAddress, init_trainer_rank, mean_over_ranks
from vla_rl.distributed.runtime import Runtime
from vla_rl.envs.batching import module_device
from vla_rl.policies.chunk_policy import ChunkPolicy
from vla_rl.rollout.flat_batch import FlatBatch
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.chunk_rl.exploration_anneal import exploration_at
from vla_rl.training.chunk_rl.learner import load_rl_learner


class DataParallelChunkUpdate:
    """Put before a chunk algorithm class (``ChunkPolicyUpdate``) in a rank's subclass of it: its
    losses are this rank's share of each minibatch, its gradients are averaged over the group."""

    rank: int = 0
    world_size: int = 1
    policy: torch.nn.Module

    def local_rows(self, batch: FlatBatch) -> FlatBatch:
        """This rank's contiguous share of the rows; a share with none (fewer rows than ranks) is the
        first row marked invalid, so the rank still joins the step's collectives with no weight."""
        share = torch.arange(len(batch)).tensor_split(self.world_size)[self.rank]
        if len(share) > 0:
            return batch.rows(share)
        placeholder = batch.rows(torch.zeros(1, dtype=torch.long))
        placeholder.tensors["valid"] = torch.zeros(1, dtype=torch.bool)
        return placeholder

    def mean(self, values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``world_size`` times this rank's sum over the entries ``mask`` marks, divided by their count
        over every rank: its average over ranks (what the gradients and metrics take) is the mean over
        the whole minibatch."""
        weights = mask.to(values.dtype).expand_as(values)
        count = weights.sum().detach()
        dist.all_reduce(count)
        return self.world_size * (values * weights).sum() / count.clamp(min=1.0)

    def reduce_gradients(self) -> None:
        """Average every gradient over the group, flattened into one all-reduce."""
        grads = [p.grad for p in self.policy.parameters() if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        dist.all_reduce(flat)
        flat /= self.world_size
        for grad, part in zip(grads, flat.split([grad.numel() for grad in grads]), strict=True):
            grad.copy_(part.view_as(grad))

    def _metric(self, value: torch.Tensor | float) -> float:
        return mean_over_ranks(
            torch.as_tensor(float(value), dtype=torch.float64, device=module_device(self.policy))
        )


def data_parallel_class(cls: type) -> type:
    """``cls`` (a chunk algorithm) with ``DataParallelChunkUpdate`` in front of it."""
    return type(f"DataParallel{cls.__name__}", (DataParallelChunkUpdate, cls), {})


class ChunkRank(DataParallelRank):
    """One trainer rank of chunk RL: the policy (and reference) replica and the algorithm named in
    ``cfg.algorithm``, on the GPU Ray gave the rank if any."""

    def __init__(self, cfg: VLARLConfig, policy_dir: str, rank: int, world_size: int) -> None:
        torch.set_num_threads(cfg.torch_num_threads)
        device = "cuda" if torch.cuda.is_available() else "cpu"
        self.cfg = dataclasses.replace(cfg, device=device)
        self.rank, self.world_size = rank, world_size
        self.policy: ChunkPolicy
        self.policy, self.reference = load_rl_learner(self.cfg, Path(policy_dir))
        self.algorithm: Any = None

    def join(self, address: RendezvousAddress) -> None:
        init_trainer_rank(address, self.rank, self.world_size)
        cls = data_parallel_class(algorithm_class(self.cfg.algorithm.name))
        self.algorithm = cls(self.policy, self.cfg.algorithm, self.reference)
        self.algorithm.rank, self.algorithm.world_size = self.rank, self.world_size

    def receive(self, batch: Any) -> Any:
        """The batch, with the exploration the driver sampled it with (annealed by update)."""
        settings = exploration_at(self.cfg.policy, self.algorithm.updates)
        if settings:
            self.policy.set_exploration(**settings)  # type: ignore[operator]
        return batch


def build_data_parallel_chunk(
    cfg: VLARLConfig, policy: ChunkPolicy, policy_dir: Path, runtime: Runtime, rank_cls: type = ChunkRank
) -> DataParallelAlgorithm:
    """``cfg.algorithm`` on ``cfg.distributed.trainer_ranks`` ranks of ``runtime``, placed as the config
    says, training replicas of ``policy`` loaded from ``policy_dir``."""
    dist_cfg = cfg.distributed
    resources = worker_resources(runtime, dist_cfg, "trainer", dist_cfg.trainer_ranks, dist_cfg.trainer_cpus)
    rank_args = (cfg, str(policy_dir.resolve()))  # ranks may run in another working directory
    return DataParallelAlgorithm(
        runtime, policy, rank_cls, rank_args, dist_cfg.trainer_ranks, resources, dist_cfg.rendezvous_host
    )
