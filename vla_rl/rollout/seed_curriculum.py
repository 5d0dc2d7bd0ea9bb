"""Success-weighted curriculum over initial states for episode rollouts (GRPO).

A fixed pool of reset seeds stands for a pool of (task variant, initial state) pairs: the seed sets
the instruction, the object layout and the colours. Each seed keeps an exponential moving average
of the success its groups achieved; groups are drawn with probability proportional to
``1 - success + floor``, so states the policy already solves come back rarely and unseen ones
(estimate 0.5) and failing ones often.
"""

from __future__ import annotations

import torch


class SeedCurriculum:
    def __init__(self, pool_size: int, seed: int, floor: float = 0.1, momentum: float = 0.5) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        if floor <= 0.0 or not 0.0 <= momentum < 1.0:
            raise ValueError(f"need floor > 0 and momentum in [0, 1), got {floor}, {momentum}")
        self.seeds = torch.arange(pool_size) + seed * pool_size
        self.success = torch.full((pool_size,), 0.5)
        self.floor = floor
        self.momentum = momentum
        self.generator = torch.Generator().manual_seed(seed)

    def weights(self) -> torch.Tensor:
        return 1.0 - self.success + self.floor

    def draw(self, count: int) -> list[int]:
        """``count`` distinct pool seeds (with replacement when the pool is smaller)."""
        replacement = count > len(self.seeds)
        index = torch.multinomial(self.weights(), count, replacement=replacement, generator=self.generator)
        return self.seeds[index].tolist()

    def update(self, seeds: list[int], success_rates: list[float]) -> None:
        """Fold the success rate each drawn seed's group achieved into its estimate."""
        offset = int(self.seeds[0])
        for seed, rate in zip(seeds, success_rates, strict=True):
            i = seed - offset
            self.success[i] = self.momentum * self.success[i] + (1.0 - self.momentum) * rate

    def state_dict(self) -> dict[str, object]:
        return {"success": self.success.clone(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        self.success = state["success"].clone()  # type: ignore[union-attr]
        self.generator.set_state(state["generator"])  # type: ignore[arg-type]
