"""A training run's runtime and the resources of its workers, from the ``distributed`` config.

Without a GPU placement (``placement.mode: none``) each worker asks only for CPUs. With one, the
run reserves one placement-group bundle per GPU (Ray's own accounting) and each env worker and
trainer rank is scheduled on the bundle its role's slot in the plan names, with that slot's share
of the GPU (split evenly when more workers than slots share it).
"""

from __future__ import annotations

from vla_rl.config.distributed import DistributedConfig
from vla_rl.distributed.placement import plan_placement
from vla_rl.distributed.runtime import Resources, Runtime, make_runtime


def needs_runtime(cfg: DistributedConfig) -> bool:
    """Whether any worker runs outside the plain single-process loop."""
    return cfg.runtime == "ray" or cfg.env_workers > 0 or cfg.trainer_ranks > 0


def make_training_runtime(cfg: DistributedConfig) -> Runtime | None:
    """The runtime the run's workers share (``None`` when everything runs in the training loop)."""
    if not needs_runtime(cfg):
        return None
    options = {"address": cfg.ray_address} if cfg.runtime == "ray" else {}
    return make_runtime(cfg.runtime, **options)


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
