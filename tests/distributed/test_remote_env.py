"""Env workers as one env: same worlds as a local staged env; a killed worker is replaced, its
worlds start fresh episodes marked lost, and the other workers' worlds go on untouched."""

from __future__ import annotations

import contextlib
import os

import torch

from vla_rl.distributed.remote_env import EnvWorker, make_worker_env
from vla_rl.distributed.runtime import InProcessRuntime, Resources
from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import make_env


def _actions(steps: int, num_envs: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.rand(num_envs, 4, generator=generator) * 2 - 1 for _ in range(steps)]


def _cfg(**overrides) -> EnvConfig:
    return EnvConfig(task="reach", num_envs=8, num_threads=1, max_episode_steps=4, **overrides)


class CrashableEnvWorker(EnvWorker):
    def crash(self) -> None:
        os._exit(1)  # the worker's process dies, as it would on a segfault or OOM kill


def _run(runtime, kill_at: int | None = None):
    env = make_worker_env(
        runtime,
        _cfg(pipeline_stages=2),
        num_workers=2,
        resources=Resources(num_cpus=0),
        worker_cls=CrashableEnvWorker,
    )
    first, _ = env.reset(seed=3)
    results = []
    for t, action in enumerate(_actions(6, 8)):
        if t == kill_at:
            with contextlib.suppress(runtime.worker_death_errors()):
                env.pool.workers[1].call("crash").result()
        results.append(env.step(action))
    events = list(env.events)
    env.close()
    return first, results, events


def test_workers_hold_the_same_worlds_as_a_local_staged_env():
    first, results, events = _run(InProcessRuntime())
    assert events == [] and not any(r.info["lost"].any() for r in results)
    local = make_env(_cfg(pipeline_stages=4))  # 2 workers x 2 stages: the same four stages
    obs, _ = local.reset(seed=3)
    assert torch.equal(first["privileged"], obs["privileged"])
    for t, action in enumerate(_actions(6, 8)):
        expected = local.step(action)
        assert torch.equal(results[t].obs["privileged"], expected.obs["privileged"])
        assert torch.equal(results[t].reward, expected.reward)
        assert torch.equal(results[t].truncated, expected.truncated)  # autoresets at step 4


def test_killed_worker_is_replaced_and_its_step_is_marked_lost(ray_runtime):
    _, clean, _ = _run(ray_runtime)
    _, results, events = _run(ray_runtime, kill_at=2)
    assert len(events) == 1 and events[0].startswith("env worker 1 died (")
    assert results[2].info["lost"].tolist() == [False] * 4 + [True] * 4
    assert results[2].truncated[4:].all() and not results[2].terminated.any()
    # The surviving worker's worlds are untouched by the failure ...
    for t in range(6):
        assert torch.equal(results[t].obs["privileged"][:4], clean[t].obs["privileged"][:4])
    # ... and the replacement's worlds run new episodes, not a silent re-run of the old ones.
    assert not torch.equal(results[2].obs["privileged"][4:], clean[2].obs["privileged"][4:])
    assert not any(r.info["lost"].any() for r in results[3:])


def test_the_hint_to_skip_images_reaches_the_workers_stages():
    env = make_worker_env(
        InProcessRuntime(), _cfg(pipeline_stages=2, cameras=["front"], image_size=32), num_workers=2
    )
    obs, _ = env.reset(seed=3)
    actions = _actions(2, 8)
    env.skip_images_next_step()
    skipped = env.step(actions[0])  # no episode ends at the first step
    assert torch.equal(skipped.obs["rgb_front"], obs["rgb_front"])  # the previous images, not rendered
    assert not torch.equal(env.step(actions[1]).obs["rgb_front"], skipped.obs["rgb_front"])
    env.close()
