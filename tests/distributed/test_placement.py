"""Placement plans by hand, and their layout on a Ray instance with 4 declared GPUs."""

from __future__ import annotations

from collections import defaultdict

import pytest

from vla_rl.config.distributed import PlacementConfig
from vla_rl.distributed.layout import plan_placement
from vla_rl.distributed.runtime import Resources


def _layout(slots) -> dict[str, list[tuple[int, float]]]:
    layout = defaultdict(list)
    for slot in slots:
        layout[slot.role].append((slot.gpu, slot.gpu_fraction))
    return dict(layout)


def test_plans_by_hand():
    collocated = _layout(plan_placement(PlacementConfig("collocated", num_gpus=2)))
    assert collocated == {role: [(0, 1 / 3), (1, 1 / 3)] for role in ("env", "inference", "trainer")}
    split = _layout(
        plan_placement(PlacementConfig("disaggregated", num_gpus=4, env_gpus=1, inference_gpus=1))
    )
    assert split == {"env": [(0, 1.0)], "inference": [(1, 1.0)], "trainer": [(2, 1.0), (3, 1.0)]}
    hybrid = _layout(plan_placement(PlacementConfig("hybrid", num_gpus=4, env_gpus=2)))
    assert hybrid == {
        "env": [(0, 0.25), (1, 0.25)],
        "inference": [(0, 0.25), (1, 0.25)],
        "trainer": [(0, 0.5), (1, 0.5), (2, 1.0), (3, 1.0)],
    }


@pytest.mark.parametrize("mode", ["collocated", "disaggregated", "hybrid"])
def test_no_gpu_is_asked_for_more_than_it_has(mode):
    per_gpu = defaultdict(float)
    for slot in plan_placement(PlacementConfig(mode, num_gpus=4, env_gpus=1, inference_gpus=1)):
        per_gpu[slot.gpu] += slot.gpu_fraction
    assert set(per_gpu) == {0, 1, 2, 3} and max(per_gpu.values()) <= 1.0 + 1e-9


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (PlacementConfig("ring"), "unknown 'ring'"),
        (PlacementConfig("disaggregated", num_gpus=2), "leave 0 for training"),
        (PlacementConfig("hybrid", num_gpus=2, env_gpus=3), "env_gpus must lie in"),
        (PlacementConfig("collocated", num_gpus=0), "num_gpus"),
    ],
)
def test_bad_plans_are_clear_errors(cfg, message):
    with pytest.raises(ValueError, match=message):
        plan_placement(cfg)


class GpuProbe:
    def gpu_ids(self) -> list:
        import ray

        return [str(i) for i in ray.get_gpu_ids()]


@pytest.mark.parametrize("mode", ["collocated", "disaggregated", "hybrid"])
def test_ray_places_each_worker_on_its_planned_gpu(ray_runtime, mode):
    declared_gpus = int(ray_runtime.ray.cluster_resources()["GPU"])
    slots = plan_placement(PlacementConfig(mode, num_gpus=declared_gpus, env_gpus=1, inference_gpus=1))
    group = ray_runtime.gpu_placement_group(declared_gpus)
    try:
        probes = [
            ray_runtime.spawn(
                GpuProbe,
                resources=Resources(num_cpus=0, num_gpus=slot.gpu_fraction, placement_group=group,
                                    bundle_index=slot.gpu),
            )
            for slot in slots
        ]  # fmt: skip
        seen = ray_runtime.gather([probe.call("gpu_ids") for probe in probes])
        physical = defaultdict(set)
        for slot, ids in zip(slots, seen, strict=True):
            assert len(ids) == 1, f"{slot} got GPUs {ids}"
            physical[slot.gpu].add(ids[0])
        assert all(len(ids) == 1 for ids in physical.values()), "one planned GPU, one physical GPU"
        assert len({next(iter(ids)) for ids in physical.values()}) == len(physical), "planned GPUs differ"
    finally:
        for probe in probes:
            ray_runtime.ray.kill(probe.actor)
        ray_runtime.ray.util.remove_placement_group(group)
