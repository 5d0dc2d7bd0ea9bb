"""The in-process and Ray runtimes run the same worker class and give the same results.

Ray runs for real (a local instance on loopback, started by the test)."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from vla_rl.distributed.env_worker import EnvWorker
from vla_rl.distributed.runtime import InProcessRuntime, Resources, make_runtime
from vla_rl.envs.config import EnvConfig

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None, reason='needs pip install -e ".[ray]"'
)


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    def add(self, amount: int) -> int:
        self.value += amount
        return self.value

    def fail(self) -> None:
        raise RuntimeError("worker error")


@pytest.fixture(scope="module")
def ray_runtime():
    runtime = make_runtime("ray", num_cpus=2)
    # This test module is not importable in Ray's worker processes: ship its classes by value.
    runtime.ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield runtime
    runtime.shutdown()


def _trajectory(runtime) -> list[torch.Tensor]:
    cfg = EnvConfig(task="push", num_envs=3, num_threads=1)
    worker = runtime.spawn(EnvWorker, cfg, resources=Resources(num_cpus=1))
    states = [worker.call("reset", seed=5).result()["privileged"]]
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):
        action = torch.rand(3, 4, generator=generator) * 2 - 1
        states.append(worker.call("step", action).result().obs["privileged"])
    worker.call("close").result()
    return states


def test_in_process_calls_run_at_once_and_deliver_errors_through_the_future():
    runtime = InProcessRuntime()
    counter = runtime.spawn(Counter, 10)
    futures = [counter.call("add", 1), counter.call("add", 2)]
    assert runtime.gather(futures) == [11, 13]
    with pytest.raises(RuntimeError, match="worker error"):
        counter.call("fail").result()


def test_unknown_runtime_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown runtime 'slurm'"):
        make_runtime("slurm")


@needs_ray
def test_ray_actor_keeps_its_state_and_raises_remote_errors(ray_runtime):
    counter = ray_runtime.spawn(Counter, 10, resources=Resources(num_cpus=0.5))
    assert ray_runtime.gather([counter.call("add", 1), counter.call("add", 2)]) == [11, 13]
    with pytest.raises(RuntimeError, match="worker error"):
        counter.call("fail").result()


@needs_ray
def test_env_worker_gives_the_same_trajectory_in_process_and_as_a_ray_actor(ray_runtime):
    local, remote = _trajectory(InProcessRuntime()), _trajectory(ray_runtime)
    for a, b in zip(local, remote, strict=True):
        assert torch.equal(a, b)
