"""Running mean/variance of observations, kept as module buffers so checkpoints carry it."""

from __future__ import annotations

import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Tracks the mean and variance of a stream of ``[B, *shape]`` batches.

    Batches are merged with the parallel-variance formula of Chan et al.: for the running
    statistics (mean_a, var_a, n_a) and a batch (mean_b, var_b, n_b), with delta = mean_b - mean_a
    and n = n_a + n_b,
    ``mean = mean_a + delta * n_b / n`` and
    ``var = (var_a * n_a + var_b * n_b + delta**2 * n_a * n_b / n) / n`` (population variance).
    """

    def __init__(self, shape: tuple[int, ...], epsilon: float = 1e-8, clip: float = 5.0) -> None:
        super().__init__()
        self.epsilon = epsilon
        """Added to the variance before the square root."""
        self.clip = clip
        """Normalised values are clipped to [-clip, clip]."""
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, batch: torch.Tensor) -> None:
        batch = batch.detach().to(torch.float64).reshape(-1, *self.mean.shape)
        n_b = batch.shape[0]
        if n_b == 0:
            return
        var_b, mean_b = torch.var_mean(batch, dim=0, correction=0)
        # The counts are plain numbers: the merge is then a few in-place tensor operations, which
        # matters because it runs at every control step.
        n_a = float(self.count)
        n = n_a + n_b
        delta = mean_b - self.mean
        self.mean.add_(delta, alpha=n_b / n)
        # var = (var_a * n_a + var_b * n_b + delta^2 * n_a * n_b / n) / n
        self.var.mul_(n_a / n).add_(var_b, alpha=n_b / n).add_(delta.square_(), alpha=n_a * n_b / (n * n))
        self.count.fill_(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x`` with the current statistics (no update)."""
        mean = self.mean.to(x.dtype)
        std = torch.sqrt(self.var + self.epsilon).to(x.dtype)
        return ((x - mean) / std).clamp(-self.clip, self.clip)
