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

With ``distributed.trainer_strategy=fsdp2`` each rank holds a shard of every parameter, its gradient
and its Adam state (``FullyShardedChunkUpdate``): ``fully_shard`` on each transformer layer and on the
policy, whose ``evaluate`` and ``observation_cache`` gather its parameters as a forward pass would.
The backward pass reduce-scatters the gradients (their average over the ranks, what the ``ddp``
all-reduce gives), so the step is the same. The weights and the optimizer state leave the ranks whole
(``get_model_state_dict`` / ``get_optimizer_state_dict``, the optimizer's in the layout of
``Optimizer.state_dict``), so checkpoints are the same files whatever the strategy.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from vla_rl.algorithms.registry import algorithm_class
from vla_rl.distributed.data_parallel import DataParallelAlgorithm, DataParallelRank
from vla_rl.distributed.layout import worker_resources
from vla_rl.distributed.process_group import (
    RendezvousAddress,
    init_trainer_rank,
    mean_over_ranks,
    optimizer_state_by_index,
    optimizer_state_by_name,
    shard_layers_and_root,
)
from vla_rl.distributed.runtime import Runtime
from vla_rl.envs.batching import module_device
from vla_rl.policies.chunk_policy import ChunkEvaluation, ChunkPolicy
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


class FullyShardedChunkUpdate(DataParallelChunkUpdate):
    """``DataParallelChunkUpdate`` of a policy sharded by ``fully_shard``, whose backward pass
    averages the gradients itself (a reduce-scatter)."""

    def reduce_gradients(self) -> None:
        pass


def data_parallel_class(cls: type, update: type = DataParallelChunkUpdate) -> type:
    """``cls`` (a chunk algorithm) with ``update`` (a ``DataParallelChunkUpdate``) in front of it."""
    return type(f"{update.__name__.removesuffix('ChunkUpdate')}{cls.__name__}", (update, cls), {})


@functools.cache
def register_evaluation_pytree() -> None:
    """FSDP2 hooks the tensors ``evaluate`` returns for its backward pass: a dataclass is opaque to it
    until registered as a pytree (once per process)."""
    torch.export.register_dataclass(ChunkEvaluation, serialized_type_name="vla_rl.ChunkEvaluation")


SHARDED_METHODS = ("evaluate", "observation_cache")
"""The policy methods an update calls that gather a sharded policy's parameters as ``forward`` does."""
_WHOLE = StateDictOptions(full_state_dict=True)
_WHOLE_ON_RANK_0 = StateDictOptions(full_state_dict=True, cpu_offload=True)


class ChunkRank(DataParallelRank):
    """One trainer rank of chunk RL: the policy (and reference) replica and the algorithm named in
    ``cfg.algorithm``, on the GPU Ray gave the rank if any."""

    sharded = False
    """Whether the policy is sharded over the ranks (``distributed.trainer_strategy=fsdp2``; the fixed
    reference policy of a KL term stays whole on every rank)."""

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
        self.sharded = self.cfg.distributed.trainer_strategy == "fsdp2"
        update = DataParallelChunkUpdate
        if self.sharded:
            register_evaluation_pytree()
            # The losses never write into the policy's outputs, which FSDP2 warns about for views.
            warnings.filterwarnings("ignore", message="FSDP2-wrapped module .* returned a view tensor")
            shard_layers_and_root(self.policy, SHARDED_METHODS)
            update = FullyShardedChunkUpdate
        cls = data_parallel_class(algorithm_class(self.cfg.algorithm.name), update)
        self.algorithm = cls(self.policy, self.cfg.algorithm, self.reference)
        self.algorithm.rank, self.algorithm.world_size = self.rank, self.world_size

    def policy_state(self) -> dict[str, torch.Tensor]:
        if not self.sharded:
            return super().policy_state()
        whole = get_model_state_dict(self.policy, options=_WHOLE)
        return {name: value.cpu() for name, value in whole.items()}

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        if not self.sharded:
            return super().load_policy_state(state)
        set_model_state_dict(self.policy, state, options=_WHOLE)

    def state_dict(self) -> dict[str, Any] | None:
        if not self.sharded:
            return super().state_dict()
        optimizer = get_optimizer_state_dict(self.policy, self.algorithm.optimizer, options=_WHOLE_ON_RANK_0)
        if self.rank != 0:
            return None
        return {**self.algorithm.state_dict(), "optimizer": optimizer_state_by_index(optimizer)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not self.sharded:
            return super().load_state_dict(state)
        optimizer = self.algorithm.optimizer
        named = optimizer_state_by_name(state["optimizer"], self.policy, optimizer)
        set_optimizer_state_dict(self.policy, optimizer, named, options=_WHOLE)
        self.algorithm.load_progress(state)

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
