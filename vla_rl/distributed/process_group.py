"""Trainer ranks over torch.distributed: process-group set-up, DDP / FSDP2 wrapping, full states.

Rank 0 picks a free port on its address and publishes ``(address, port)``; every rank then calls
``init_trainer_rank`` with it (NCCL on GPUs, gloo on CPUs). ``shard_batch`` gives each rank its part
of a global batch, so ``world_size`` ranks with DDP or FSDP2 average the same gradient a single
trainer computes on the whole batch. ``full_state`` / ``load_full_state`` turn a wrapped model and
its optimizer into plain full tensors and back (``torch.distributed.checkpoint.state_dict``), so one
checkpoint format serves a single trainer, DDP and FSDP2.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)
from torch.nn.parallel import DistributedDataParallel

from vla_rl.distributed.runtime import Worker


@dataclass(frozen=True)
class RendezvousAddress:
    host: str
    port: int


def publish_address(host: str = "127.0.0.1") -> RendezvousAddress:
    """Rank 0's address with a port the OS just found free (handed to the other ranks). ``host="auto"``
    takes this node's address as Ray knows it (ranks on other nodes must reach it)."""
    if host == "auto":
        import ray

        host = ray.util.get_node_ip_address()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return RendezvousAddress(host, probe.getsockname()[1])


def init_trainer_rank(
    address: RendezvousAddress, rank: int, world_size: int, backend: str | None = None
) -> None:
    """Join the trainer group; ``backend`` defaults to NCCL with CUDA, gloo otherwise."""
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(
        backend, init_method=f"tcp://{address.host}:{address.port}", rank=rank, world_size=world_size
    )


class GroupMember(Worker):
    """Base of trainer-rank workers: rank 0 names the meeting point, every rank leaves the group."""

    def rendezvous(self, host: str = "127.0.0.1") -> RendezvousAddress:
        """(Rank 0) an address and free port the other ranks join at (``publish_address``)."""
        return publish_address(host)

    def leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def fully_sharded(module: torch.nn.Module) -> torch.nn.Module:
    """``module`` with its parameters sharded over the group (FSDP2's ``fully_shard``): each rank
    keeps 1/world_size of every parameter and its optimizer state, gathers the whole before forward
    and backward, and reduce-scatters (averages) the gradients."""
    from torch.distributed.fsdp import fully_shard

    return fully_shard(module)


def shard_layers_and_root(module: torch.nn.Module, methods: tuple[str, ...] = ()) -> int:
    """``fully_shard`` each transformer layer of ``module`` (transformers' ``GradientCheckpointingLayer``),
    then the whole, so a layer's parameters are gathered only while it computes; ``methods`` (besides
    ``forward``) gather the root's parameters as ``forward`` does. Returns the number of layers."""
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method
    from transformers.modeling_layers import GradientCheckpointingLayer

    layers = [layer for layer in module.modules() if isinstance(layer, GradientCheckpointingLayer)]
    for layer in layers:
        fully_shard(layer)
    fully_shard(module)
    for method in methods:
        register_fsdp_forward_method(module, method)
    return len(layers)


def optimizer_state_by_index(named: dict) -> dict:
    """A full optimizer state keyed by parameter names (``get_optimizer_state_dict``) in the layout
    of ``torch.optim.Optimizer.state_dict``: parameters numbered in the order of the groups."""
    index: dict[str, int] = {}
    groups = [
        {**group, "params": [index.setdefault(name, len(index)) for name in group["params"]]}
        for group in named["param_groups"]
    ]
    return {"state": {index[name]: value for name, value in named["state"].items()}, "param_groups": groups}


def optimizer_state_by_name(indexed: dict, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """``optimizer_state_by_index``'s inverse for ``optimizer`` over ``model``'s parameters."""
    name_of = {id(parameter): name for name, parameter in model.named_parameters()}
    names = [[name_of[id(p)] for p in group["params"]] for group in optimizer.param_groups]
    flat = [name for group in names for name in group]
    return {
        "state": {flat[int(i)]: value for i, value in indexed["state"].items()},
        "param_groups": [
            {**group, "params": group_names}
            for group, group_names in zip(indexed["param_groups"], names, strict=True)
        ],
    }


WRAPPERS: dict[str, Callable[[torch.nn.Module], torch.nn.Module]] = {
    "none": lambda module: module,
    "ddp": DistributedDataParallel,
    "fsdp2": fully_sharded,
}
"""Data-parallel strategies of a trainer group, by config name: ``ddp`` wraps the module so that
backward averages gradients over the group, ``fsdp2`` shards its parameters (``fully_sharded``)."""

_FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict, dict]:
    """Full (unsharded) CPU model and optimizer state dicts, the same for every strategy. A
    collective under FSDP2: every rank calls it; rank 0's copy is the one to save."""
    return (
        get_model_state_dict(model, options=_FULL),
        get_optimizer_state_dict(model, optimizer, options=_FULL),
    )


def load_full_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, model_state: dict, optimizer_state: dict
) -> None:
    """Load what ``full_state`` returned into ``model`` and ``optimizer`` (every rank, same states)."""
    set_model_state_dict(model, model_state, options=StateDictOptions(full_state_dict=True))
    set_optimizer_state_dict(
        model, optimizer, optimizer_state, options=StateDictOptions(full_state_dict=True)
    )


def mean_over_ranks(value: torch.Tensor) -> float:
    """The mean of ``value`` over the group's ranks (the global mean of equal shares' means)."""
    if not dist.is_initialized():
        return float(value)
    total = value.detach().clone()
    dist.all_reduce(total)
    return float(total) / dist.get_world_size()


def shard_batch(batch: torch.Tensor | dict, rank: int, world_size: int) -> torch.Tensor | dict:
    """Rank ``rank``'s contiguous share of a global batch (its size must divide evenly): of a tensor,
    or of every tensor of a (nested) dict of them."""
    if isinstance(batch, dict):
        return {key: shard_batch(value, rank, world_size) for key, value in batch.items()}
    if batch.shape[0] % world_size:
        raise ValueError(f"a batch of {batch.shape[0]} does not split into {world_size} equal shares")
    return batch.chunk(world_size)[rank]
