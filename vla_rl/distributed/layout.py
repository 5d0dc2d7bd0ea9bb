"""A training run's runtime and the resources of its workers, from the ``distributed`` config.

Without a GPU placement (``placement.mode: none``) each worker asks only for CPUs. With one, the
run reserves one placement-group bundle per GPU (Ray's own accounting) and each env worker and
trainer rank is scheduled on the bundle its role's slot in the plan names, with that slot's share
of the GPU (split evenly when more workers than slots share it).

The placement plan (where each worker runs): collocated, disaggregated or hybrid GPU layouts.

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

from vla_rl.config.distributed import DistributedConfig, PlacementConfig
from vla_rl.config.structured import ConfigError
from vla_rl.distributed.runtime import Resources, Runtime, make_runtime

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


def needs_runtime(cfg: DistributedConfig) -> bool:
    """Whether any worker runs outside the plain single-process loop."""
    return cfg.runtime == "ray" or cfg.env_workers > 0 or cfg.trainer_ranks > 0 or cfg.rollout_workers > 0


def make_training_runtime(cfg: DistributedConfig) -> Runtime | None:
    """The runtime the run's workers share (``None`` when everything runs in the training loop).

    ``ConfigError`` when the workers would ask Ray for more CPUs than it has free: Ray would wait for
    them without end and the run would never start."""
    if not needs_runtime(cfg):
        return None
    options = {"address": cfg.ray_address} if cfg.runtime == "ray" else {}
    runtime = make_runtime(cfg.runtime, **options)
    available = runtime.available_cpus()
    shortfall = None if available is None else cpu_shortfall(cfg, available)
    if shortfall is not None:
        runtime.shutdown()
        raise ConfigError(shortfall)
    return runtime


def requested_cpus(cfg: DistributedConfig) -> float:
    """CPUs the run's workers ask of the runtime together: every env (or rollout) worker's and
    trainer rank's."""
    env_workers = cfg.env_workers + cfg.rollout_workers
    return env_workers * cfg.env_worker_cpus + cfg.trainer_ranks * cfg.trainer_cpus


def cpu_shortfall(cfg: DistributedConfig, available_cpus: float) -> str | None:
    """What to change when the workers ask for more than ``available_cpus`` CPUs; None when they fit.

    On a Ray cluster that adds nodes on demand (an autoscaler), CPUs not yet there count as missing."""
    requested = requested_cpus(cfg)
    if requested <= available_cpus:
        return None
    roles = [
        (cfg.env_workers, "env workers", "distributed.env_worker_cpus", cfg.env_worker_cpus),
        (cfg.rollout_workers, "rollout workers", "distributed.env_worker_cpus", cfg.env_worker_cpus),
        (cfg.trainer_ranks, "trainer ranks", "distributed.trainer_cpus", cfg.trainer_cpus),
    ]
    asking = [(count, what, key, cpus) for count, what, key, cpus in roles if count > 0 and cpus > 0]
    keys = " and ".join(f"'{key}'" for _, _, key, _ in asking)
    parts = " + ".join(f"{count} {what} x {cpus:g} ({key})" for count, what, key, cpus in asking)
    return (
        f"config key{'s' if len(asking) > 1 else ''} {keys}: the workers ask Ray for {requested:g} CPUs "
        f"({parts}) but {available_cpus:g} are free, so they would wait for them for ever; ask for fewer "
        f"CPUs per worker (a fraction such as 0.5, or 0) or run fewer workers"
    )


def worker_resources(
    runtime: Runtime, cfg: DistributedConfig, role: str, count: int, cpus: float
) -> list[Resources]:
    """Resources of ``count`` workers of ``role`` (``env`` or ``trainer``)."""
    if cfg.placement.mode == "none":
        return [Resources(num_cpus=cpus)] * count
    slots = [slot for slot in plan_placement(cfg.placement) if slot.role == role]
    if role == "trainer" and len(slots) != count:
        raise ValueError(
            f"config key 'distributed.trainer_ranks': the {cfg.placement.mode} placement plans "
            f"{len(slots)} trainer ranks, got {count}"
        )
    group = runtime.shared_gpu_placement_group(cfg.placement.num_gpus)
    sharing = -(-count // len(slots))  # workers per slot, rounded up
    return [
        Resources(
            num_cpus=cpus,
            num_gpus=slots[k % len(slots)].gpu_fraction / sharing,
            placement_group=group,
            bundle_index=slots[k % len(slots)].gpu,
        )
        for k in range(count)
    ]
