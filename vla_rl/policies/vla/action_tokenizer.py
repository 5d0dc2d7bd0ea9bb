"""Continuous actions <-> reserved vocabulary tokens (OpenVLA-style uniform binning).

Each action dimension is first normalised to [-1, 1] with per-dimension quantile statistics
(``low`` = 1st percentile, ``high`` = 99th percentile of the demonstrations, values outside are
clipped), then cut into ``num_bins`` equal bins of width ``2 / num_bins``. Bin ``k`` is the
vocabulary token ``vocab_size - num_bins + k``: the last ``num_bins`` ids of the vocabulary are
reserved for actions. Decoding returns bin centres, so a round trip is off by at most half a bin,
i.e. ``(high - low) / (2 * num_bins)`` in action units (for actions inside ``[low, high]``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

ACTION_STATS_FILE = "action_stats.json"


class ActionTokenizer:
    """Per-dimension quantile normalisation + uniform binning onto the last ``num_bins`` token ids."""

    def __init__(
        self,
        vocab_size: int,
        low: Sequence[float] | torch.Tensor,
        high: Sequence[float] | torch.Tensor,
        num_bins: int = 256,
    ) -> None:
        self.vocab_size = int(vocab_size)
        self.num_bins = int(num_bins)
        self.low = torch.as_tensor(low, dtype=torch.float32).flatten()
        self.high = torch.as_tensor(high, dtype=torch.float32).flatten()
        if self.low.shape != self.high.shape:
            raise ValueError(f"low {tuple(self.low.shape)} and high {tuple(self.high.shape)} differ in shape")
        if not bool((self.high > self.low).all()):
            raise ValueError("every action dimension needs high > low")
        if self.num_bins < 2 or self.num_bins > self.vocab_size:
            raise ValueError(f"num_bins={num_bins} must be in [2, vocab_size={vocab_size}]")

    @property
    def action_dim(self) -> int:
        return int(self.low.numel())

    @property
    def first_action_token_id(self) -> int:
        """Token id of bin 0; bins occupy ``[first_action_token_id, vocab_size)``."""
        return self.vocab_size - self.num_bins

    @property
    def bin_width(self) -> float:
        """Bin width in normalised units ([-1, 1] range)."""
        return 2.0 / self.num_bins

    def normalise(self, actions: torch.Tensor) -> torch.Tensor:
        low, high = self.low.to(actions.device), self.high.to(actions.device)
        scaled = 2.0 * (actions.float() - low) / (high - low) - 1.0
        return scaled.clamp(-1.0, 1.0)

    def unnormalise(self, normalised: torch.Tensor) -> torch.Tensor:
        low, high = self.low.to(normalised.device), self.high.to(normalised.device)
        return low + (normalised + 1.0) * 0.5 * (high - low)

    def actions_to_bins(self, actions: torch.Tensor) -> torch.Tensor:
        """float [..., A] -> int64 bin indices [..., A] in ``[0, num_bins)``."""
        self._check_dim(actions)
        position = (self.normalise(actions) + 1.0) / self.bin_width
        return position.floor().long().clamp(0, self.num_bins - 1)

    def bins_to_actions(self, bins: torch.Tensor) -> torch.Tensor:
        """int bin indices [..., A] -> float32 bin-centre actions [..., A] in action units."""
        self._check_dim(bins)
        centres = -1.0 + (bins.float() + 0.5) * self.bin_width
        return self.unnormalise(centres)

    def encode(self, actions: torch.Tensor) -> torch.Tensor:
        """float [..., A] -> token ids [..., A] in the reserved range."""
        return self.actions_to_bins(actions) + self.first_action_token_id

    def decode(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Token ids [..., A] (must be action tokens) -> float32 actions [..., A]."""
        bins = token_ids.long() - self.first_action_token_id
        if bool(((bins < 0) | (bins >= self.num_bins)).any()):
            raise ValueError("token ids outside the reserved action range")
        return self.bins_to_actions(bins)

    def _check_dim(self, values: torch.Tensor) -> None:
        if values.shape[-1] != self.action_dim:
            raise ValueError(f"expected last dim {self.action_dim}, got shape {tuple(values.shape)}")

    def to_dict(self) -> dict[str, object]:
        return {
            "vocab_size": self.vocab_size,
            "num_bins": self.num_bins,
            "low": self.low.tolist(),
            "high": self.high.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ActionTokenizer:
        return cls(
            vocab_size=int(data["vocab_size"]),  # type: ignore[arg-type]
            low=data["low"],  # type: ignore[arg-type]
            high=data["high"],  # type: ignore[arg-type]
            num_bins=int(data["num_bins"]),  # type: ignore[arg-type]
        )

    def save(self, directory: str | Path) -> None:
        path = Path(directory) / ACTION_STATS_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def load(cls, directory: str | Path) -> ActionTokenizer:
        return cls.from_dict(json.loads((Path(directory) / ACTION_STATS_FILE).read_text()))

    @classmethod
    def from_quantiles(
        cls, actions: torch.Tensor, vocab_size: int, num_bins: int = 256, quantile: float = 0.01
    ) -> ActionTokenizer:
        """Statistics from demonstrations ``[T, A]``: ``low``/``high`` = the 1st/99th percentiles.

        Dimensions where the two quantiles coincide (a constant action) get a tiny spread so that
        the normalisation stays finite.
        """
        flat = actions.reshape(-1, actions.shape[-1]).float()
        low = torch.quantile(flat, quantile, dim=0)
        high = torch.quantile(flat, 1.0 - quantile, dim=0)
        high = torch.where(high - low < 1e-6, low + 1e-6, high)
        return cls(vocab_size=vocab_size, low=low, high=high, num_bins=num_bins)
