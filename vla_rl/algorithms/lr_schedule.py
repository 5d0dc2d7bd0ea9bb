"""Linear warmup then cosine decay of the learning rate, as a factor of the peak rate."""

from __future__ import annotations

import math


def warmup_cosine_factor(step: int, total_steps: int, warmup_steps: int, min_ratio: float = 0.0) -> float:
    """Learning-rate factor for optimizer step ``step`` (0-based) of ``total_steps``.

    Warmup: steps ``0 .. warmup_steps-1`` rise linearly as ``(step + 1) / warmup_steps``, so the first
    step already learns. Then cosine from 1 at ``step = warmup_steps`` down to ``min_ratio`` at the
    last step ``total_steps - 1`` (and ``min_ratio`` after it).

    >>> [round(warmup_cosine_factor(s, 6, 2), 3) for s in range(6)]
    [0.5, 1.0, 1.0, 0.75, 0.25, 0.0]
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    decay_steps = total_steps - 1 - warmup_steps
    if decay_steps <= 0:
        return 1.0
    progress = min((step - warmup_steps) / decay_steps, 1.0)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
