"""Where each worker runs: collocated, disaggregated or hybrid GPU layouts, as a plain plan.

``plan_placement`` turns a mode and GPU counts into one ``WorkerSlot`` per worker: its role, rank,
GPU index and the fraction of that GPU it asks for. The Ray runtime turns the plan into one
placement-group bundle per GPU and schedules each worker on its bundle, so the layout is Ray's own
resource accounting, testable on a CPU machine by declaring GPUs (``ray.init(num_gpus=4)``).

* ``collocated``: every GPU hosts one env worker, one inference worker and one trainer rank (a third
  of the GPU each; phases take turns and offload between them).
* ``disaggregated``: separate GPUs per role, ``env_gpus`` + ``inference_gpus`` + the rest training.
* ``hybrid``: env and inference workers share the first ``env_gpus`` GPUs (a quarter each), and the
  trainer group spans every GPU (half of the shared ones, all of the others).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from vla_rl.config.distributed import PlacementConfig

ROLES = ("env", "inference", "trainer")


@dataclass(frozen=True)
class WorkerSlot:
    role: str
    rank: int
    """Index of the worker within its role."""
    gpu: int
    """GPU index within the job, which is also its placement-group bundle."""
    gpu_fraction: float


def _collocated(cfg: PlacementConfig) -> list[WorkerSlot]:
    return [WorkerSlot(role, gpu, gpu, 1 / 3) for gpu in range(cfg.num_gpus) for role in ROLES]


def _disaggregated(cfg: PlacementConfig) -> list[WorkerSlot]:
    trainer_gpus = cfg.num_gpus - cfg.env_gpus - cfg.inference_gpus
    if min(cfg.env_gpus, cfg.inference_gpus, trainer_gpus) < 1:
        raise ValueError(
            f"disaggregated placement needs >= 1 GPU per role: {cfg.num_gpus} GPUs, env_gpus={cfg.env_gpus}, "
            f"inference_gpus={cfg.inference_gpus} leave {trainer_gpus} for training"
        )
    counts = {"env": cfg.env_gpus, "inference": cfg.inference_gpus, "trainer": trainer_gpus}
    slots, gpu = [], 0
    for role in ROLES:
        for rank in range(counts[role]):
            slots.append(WorkerSlot(role, rank, gpu, 1.0))
            gpu += 1
    return slots


def _hybrid(cfg: PlacementConfig) -> list[WorkerSlot]:
    if not 1 <= cfg.env_gpus <= cfg.num_gpus:
        raise ValueError(f"hybrid placement: env_gpus must lie in [1, {cfg.num_gpus}], got {cfg.env_gpus}")
    slots = [WorkerSlot(role, gpu, gpu, 0.25) for gpu in range(cfg.env_gpus) for role in ("env", "inference")]
    slots += [
        WorkerSlot("trainer", gpu, gpu, 0.5 if gpu < cfg.env_gpus else 1.0) for gpu in range(cfg.num_gpus)
    ]
    return slots


PLACEMENTS: dict[str, Callable[[PlacementConfig], list[WorkerSlot]]] = {
    "collocated": _collocated,
    "disaggregated": _disaggregated,
    "hybrid": _hybrid,
}


def plan_placement(cfg: PlacementConfig) -> list[WorkerSlot]:
    """One slot per worker; the fractions asked of each GPU never exceed 1."""
    if cfg.mode not in PLACEMENTS:
        raise ValueError(f"config key 'placement.mode': unknown {cfg.mode!r}; known: {sorted(PLACEMENTS)}")
    if cfg.num_gpus < 1:
        raise ValueError(f"config key 'placement.num_gpus' must be >= 1, got {cfg.num_gpus}")
    return PLACEMENTS[cfg.mode](cfg)
