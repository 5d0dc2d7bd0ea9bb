"""The arguments of ``BatchedEnv.reset`` as every simulator backend reads them: which worlds to
reset and the seed of each (each backend then seeds its worlds its own way)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from vla_rl.envs.base import BatchedEnv


def reset_ids(env_ids: torch.Tensor | None, num_envs: int) -> list[int]:
    """The worlds ``reset(env_ids=...)`` names, as ints: every world for None."""
    if env_ids is None:
        return list(range(num_envs))
    return [int(i) for i in torch.as_tensor(env_ids).reshape(-1).tolist()]


def world_seeds(
    env: BatchedEnv, seed: int | Sequence[int | list[int]] | None, ids: Sequence[int]
) -> list[Any] | None:
    """One seed entry per reset world ``ids`` (None: unseeded). An int ``seed`` gives world ``i``
    ``env.world_seed(seed, i)``; a sequence must hold one entry per reset world."""
    if seed is None:
        return None
    if isinstance(seed, int | np.integer):
        return [env.world_seed(int(seed), int(i)) for i in ids]
    if len(seed) != len(ids):
        raise ValueError(f"got {len(seed)} seeds for {len(ids)} reset worlds")
    return list(seed)
