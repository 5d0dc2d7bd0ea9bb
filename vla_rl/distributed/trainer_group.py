"""Trainer ranks over torch.distributed: process-group set-up and data-parallel wrapping.

Rank 0 picks a free port on its address and publishes ``(address, port)``; every rank then calls
``init_trainer_rank`` with it (NCCL on GPUs, gloo on CPUs). ``shard_batch`` gives each rank its part
of a global batch, so ``world_size`` ranks with DDP average the same gradient a single trainer
computes on the whole batch.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


@dataclass(frozen=True)
class RendezvousAddress:
    host: str
    port: int


def publish_address(host: str = "127.0.0.1") -> RendezvousAddress:
    """Rank 0's address with a port the OS just found free (handed to the other ranks)."""
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


def data_parallel(module: torch.nn.Module) -> DistributedDataParallel:
    """``module`` wrapped so that backward averages gradients over the group (DDP)."""
    return DistributedDataParallel(module)


def shard_batch(batch: torch.Tensor, rank: int, world_size: int) -> torch.Tensor:
    """Rank ``rank``'s contiguous share of a global batch (its size must divide evenly)."""
    if batch.shape[0] % world_size:
        raise ValueError(f"a batch of {batch.shape[0]} does not split into {world_size} equal shares")
    share = batch.shape[0] // world_size
    return batch[rank * share : (rank + 1) * share]
