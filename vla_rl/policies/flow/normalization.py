"""Per-dimension normalisation of actions and states with stored statistics (JSON with the checkpoint).

Two modes:

* ``"mean_std"``: ``z = (x - mean) / (std + eps)``;
* ``"quantile"``: ``z = 2 (x - q01) / (q99 - q01 + eps) - 1``, so the 1st/99th percentiles map to -1/+1.

With no statistics (``mode = "identity"``) values pass through unchanged: env actions are already in
[-1, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

EPSILON = 1e-8


@dataclass
class NormStats:
    """Statistics of one feature (actions or state), per dimension."""

    mode: str = "identity"
    """``identity``, ``mean_std`` or ``quantile``."""
    mean: list[float] | None = None
    """Per-dimension mean (``mean_std``)."""
    std: list[float] | None = None
    """Per-dimension standard deviation (``mean_std``)."""
    q01: list[float] | None = None
    """Per-dimension 1st percentile (``quantile``)."""
    q99: list[float] | None = None
    """Per-dimension 99th percentile (``quantile``)."""

    def __post_init__(self) -> None:
        needed = {"identity": (), "mean_std": ("mean", "std"), "quantile": ("q01", "q99")}
        if self.mode not in needed:
            raise ValueError(f"unknown normalisation mode {self.mode!r}; allowed: {sorted(needed)}")
        missing = [name for name in needed[self.mode] if getattr(self, name) is None]
        if missing:
            raise ValueError(f"normalisation mode {self.mode!r} needs {missing}")

    def _pair(self, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(offset, scale) with ``z = (x - offset) / scale``."""
        if self.mode == "mean_std":
            offset, scale = torch.tensor(self.mean), torch.tensor(self.std) + EPSILON
        else:
            low, high = torch.tensor(self.q01), torch.tensor(self.q99)
            offset, scale = (low + high) / 2, (high - low + EPSILON) / 2
        return offset.to(like.device, like.dtype), scale.to(like.device, like.dtype)

    def normalize(self, values: torch.Tensor) -> torch.Tensor:
        if self.mode == "identity":
            return values
        offset, scale = self._pair(values)
        return (values - offset) / scale

    def unnormalize(self, values: torch.Tensor) -> torch.Tensor:
        if self.mode == "identity":
            return values
        offset, scale = self._pair(values)
        return values * scale + offset
