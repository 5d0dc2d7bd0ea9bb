"""A killed env worker is replaced, its worlds start fresh episodes marked lost, the rest go on."""

from __future__ import annotations

import torch

from vla_rl.distributed.env_group import EnvWorkerGroup
from vla_rl.distributed.runtime import InProcessRuntime, Resources
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env


def _actions(steps: int, num_envs: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.rand(num_envs, 4, generator=generator) * 2 - 1 for _ in range(steps)]


def _run(runtime, kill_at: int | None):
    cfg = EnvConfig(task="reach", num_envs=4, num_threads=1)
    group = EnvWorkerGroup(runtime, cfg, num_workers=2, resources=Resources(num_cpus=0))
    group.reset(seed=3)
    results = []
    for t, action in enumerate(_actions(6, 4)):
        if t == kill_at:
            runtime.ray.kill(group.workers[1].actor)
        results.append(group.step(action))
    events = list(group.events)
    group.close()
    return results, events


def test_in_process_group_matches_two_plain_envs():
    results, events = _run(InProcessRuntime(), kill_at=None)
    assert events == [] and not any(r.info["lost"].any() for r in results)
    plain = [make_env(EnvConfig(task="reach", num_envs=2, num_threads=1)) for _ in range(2)]
    for k, env in enumerate(plain):
        env.reset(seed=3 + k)  # the group seeds worker k with seed + k
    for t, action in enumerate(_actions(6, 4)):
        expected = torch.cat(
            [env.step(action[2 * k : 2 * k + 2]).obs["privileged"] for k, env in enumerate(plain)]
        )
        assert torch.equal(results[t].obs["privileged"], expected)


def test_killed_worker_is_replaced_and_training_data_marks_the_lost_step(ray_runtime):
    clean, _ = _run(ray_runtime, kill_at=None)
    results, events = _run(ray_runtime, kill_at=3)
    assert len(events) == 1 and events[0].startswith("env worker 1 died (")
    lost = results[3].info["lost"]
    assert lost.tolist() == [False, False, True, True]
    assert results[3].truncated[2:].all() and not results[3].terminated.any()
    # The surviving worker's worlds are untouched by the failure ...
    for t in range(6):
        assert torch.equal(results[t].obs["privileged"][:2], clean[t].obs["privileged"][:2])
    # ... and the replaced worker's worlds run new episodes, not a silent re-run of the old ones.
    assert not torch.equal(results[3].obs["privileged"][2:], clean[3].obs["privileged"][2:])
    assert not any(r.info["lost"].any() for r in results[4:])
