"""Rows of a rollout flattened for the updates of chunk algorithms: ``FlatBatch`` (observations, sample
info and per-row tensors of equal length), shuffled into minibatches; ``RolloutBuffer.flat`` makes one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from vla_rl.envs.base import Observation
from vla_rl.envs.batching import select_worlds
from vla_rl.envs.staged import concat_observations


@dataclass
class FlatBatch:
    """Rows of a rollout: observations, sample info and per-row tensors of equal length."""

    obs: Observation
    sample_info: dict[str, torch.Tensor]
    tensors: dict[str, torch.Tensor]

    def __len__(self) -> int:
        return len(self.tensors["valid"])

    def rows(self, index: torch.Tensor) -> FlatBatch:
        return FlatBatch(
            select_worlds(self.obs, index),
            {key: value[index] for key, value in self.sample_info.items()},
            {key: value[index] for key, value in self.tensors.items()},
        )

    def valid_rows(self) -> FlatBatch:
        return self.rows(torch.nonzero(self.tensors["valid"]).squeeze(1))

    def sample(self, fraction: float, generator: torch.Generator) -> FlatBatch:
        """A random ``fraction`` of the rows (at least one), in their original order."""
        count = max(1, round(fraction * len(self)))
        return self.rows(torch.randperm(len(self), generator=generator)[:count].sort().values)

    def minibatches(self, num_minibatches: int, generator: torch.Generator | None) -> Iterator[FlatBatch]:
        """Shuffled (in order without a ``generator``), near-equal, non-empty minibatches covering every
        row once."""
        order = (
            torch.arange(len(self)) if generator is None else torch.randperm(len(self), generator=generator)
        )
        for part in order.tensor_split(max(1, min(num_minibatches, len(self)))):
            yield self.rows(part)


def concat_flat(parts: list[FlatBatch]) -> FlatBatch:
    """Rows of several rollouts as one batch (they must carry the same keys)."""
    if not parts:
        raise ValueError("nothing to concatenate")
    return FlatBatch(
        concat_observations([part.obs for part in parts]),
        {key: torch.cat([part.sample_info[key] for part in parts]) for key in parts[0].sample_info},
        {key: torch.cat([part.tensors[key] for part in parts]) for key in parts[0].tensors},
    )


def concat_zero_padded(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Concatenate along dim 0 after zero-padding every later dim (at its end) to the largest size
    among ``tensors``, e.g. per-row prompt features of batches padded to different prompt lengths."""
    sizes = [max(tensor.shape[dim] for tensor in tensors) for dim in range(tensors[0].dim())]
    padded = []
    for tensor in tensors:
        widths = [(0, sizes[dim] - tensor.shape[dim]) for dim in range(tensor.dim() - 1, 0, -1)]
        padded.append(F.pad(tensor, [side for pair in widths for side in pair]))
    return torch.cat(padded)
