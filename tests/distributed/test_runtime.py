"""The in-process and Ray runtimes run the same worker class and give the same results.

Ray runs for real (a local instance started by the ``ray_runtime`` fixture)."""

from __future__ import annotations

import pytest
import torch

from vla_rl.distributed.remote_env import EnvWorker
from vla_rl.distributed.runtime import InProcessRuntime, Resources, make_runtime
from vla_rl.envs.config import EnvConfig


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    def add(self, amount: int) -> int:
        self.value += amount
        return self.value

    def fail(self) -> None:
        raise RuntimeError("worker error")


def _trajectory(runtime) -> list[torch.Tensor]:
    cfg = EnvConfig(task="push", num_envs=3, num_threads=1)
    worker = runtime.spawn(EnvWorker, cfg, resources=Resources(num_cpus=1))
    states = [worker.call("run", 0, "reset", seed=5).result()[0]["privileged"]]
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):
        action = torch.rand(3, 4, generator=generator) * 2 - 1
        states.append(worker.call("run", 0, "step", action).result().obs["privileged"])
    worker.call("close").result()
    runtime.stop(worker)
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


def test_ray_actor_keeps_its_state_and_raises_remote_errors(ray_runtime):
    counter = ray_runtime.spawn(Counter, 10, resources=Resources(num_cpus=0.5))
    assert ray_runtime.gather([counter.call("add", 1), counter.call("add", 2)]) == [11, 13]
    with pytest.raises(RuntimeError, match="worker error"):
        counter.call("fail").result()
    ray_runtime.stop(counter)


def test_env_worker_gives_the_same_trajectory_in_process_and_as_a_ray_actor(ray_runtime):
    local, remote = _trajectory(InProcessRuntime()), _trajectory(ray_runtime)
    for a, b in zip(local, remote, strict=True):
        assert torch.equal(a, b)


class NodeAddress:
    def ip(self) -> str:
        import ray

        return ray.util.get_node_ip_address()


def test_a_local_ray_stays_on_loopback(ray_runtime):
    """The Ray the tests start (address=None) advertises and serves on 127.0.0.1 only."""
    actor = ray_runtime.spawn(NodeAddress, resources=Resources(num_cpus=0))
    assert actor.call("ip").result() == "127.0.0.1"
    assert ray_runtime.ray.get_runtime_context().gcs_address.startswith("127.0.0.1:")
    ray_runtime.stop(actor)
