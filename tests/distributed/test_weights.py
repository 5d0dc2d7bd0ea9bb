"""Weight sync: every inference worker holds the trainer's version and checksum after each update."""

from __future__ import annotations

import pytest
import torch

from vla_rl.distributed.runtime import InProcessRuntime, Resources
from vla_rl.distributed.weights import InferenceWorker, broadcast_weights, cpu_state, state_checksum
from vla_rl.envs import EnvConfig, make_env
from vla_rl.policies import PolicyConfig, build_policy


def test_checksum_sees_values_names_and_dtypes():
    state = {"w": torch.arange(4.0), "b": torch.zeros(2)}
    same = {"b": torch.zeros(2), "w": torch.arange(4.0)}
    assert state_checksum(state) == state_checksum(same)
    assert state_checksum(state) != state_checksum({"w": torch.arange(4.0) + 1e-7, "b": torch.zeros(2)})
    assert state_checksum(state) != state_checksum({"v": torch.arange(4.0), "b": torch.zeros(2)})
    assert state_checksum(state) != state_checksum({"w": torch.arange(4.0).double(), "b": torch.zeros(2)})


@pytest.mark.parametrize("runtime_name", ["inprocess", "ray"])
def test_every_update_reaches_every_worker(runtime_name, request):
    runtime = InProcessRuntime() if runtime_name == "inprocess" else request.getfixturevalue("ray_runtime")
    env = make_env(EnvConfig(task="reach", num_envs=2, num_threads=1))
    obs, _ = env.reset(seed=0)
    cfg = PolicyConfig(hidden_sizes=[16])
    trainer = build_policy(cfg, env.observation_space, env.action_space)
    workers = [
        runtime.spawn(
            InferenceWorker, cfg, env.observation_space, env.action_space, resources=Resources(num_cpus=0)
        )
        for _ in range(3)
    ]
    optimizer = torch.optim.SGD(trainer.parameters(), lr=0.1)
    for version in range(1, 4):
        loss = trainer.act(obs).action.square().sum() + sum(p.square().sum() for p in trainer.parameters())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        checksum = broadcast_weights(runtime, workers, cpu_state(trainer), version)
        reports = runtime.gather([worker.call("weights_version") for worker in workers])
        assert reports == [(version, checksum)] * 3
    actions = runtime.gather([worker.call("act", obs, True) for worker in workers])
    expected = trainer.act(obs, deterministic=True).action.detach()
    for action in actions:
        torch.testing.assert_close(action, expected)
    with pytest.raises(ValueError, match="not newer"):
        workers[0].call("load_weights", cpu_state(trainer), 2).result()
    for worker in workers:
        runtime.stop(worker)
    env.close()
