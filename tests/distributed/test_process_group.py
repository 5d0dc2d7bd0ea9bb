"""DDP on gloo (2 processes on loopback) follows the single-trainer loss curve for the same global batch."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from vla_rl.distributed.process_group import (
    WRAPPERS,
    init_trainer_rank,
    optimizer_state_by_index,
    optimizer_state_by_name,
    publish_address,
    shard_batch,
)

STEPS = 20


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=generator)
    y = x @ torch.randn(8, 1, generator=generator) + 0.1 * torch.randn(64, 1, generator=generator)
    return x, y


def _model() -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def _train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, global_loss) -> list[float]:
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(STEPS):
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(global_loss(loss.detach()))
    return losses


def _rank(rank: int, world_size: int, address, queue) -> None:
    init_trainer_rank(address, rank, world_size, backend="gloo")
    x, y = _data()

    def global_loss(loss: torch.Tensor) -> float:
        dist.all_reduce(loss)  # equal shares: the mean of the ranks' means is the global mean
        return float(loss) / world_size

    x, y = shard_batch(x, rank, world_size), shard_batch(y, rank, world_size)
    losses = _train(WRAPPERS["ddp"](_model()), x, y, global_loss)
    if rank == 0:
        queue.put(losses)
    dist.destroy_process_group()


def test_ddp_on_gloo_matches_a_single_trainer():
    single = _train(_model(), *_data(), global_loss=float)
    context = mp.get_context("spawn")
    queue = context.Queue()
    address = publish_address()
    processes = [context.Process(target=_rank, args=(r, 2, address, queue)) for r in range(2)]
    for process in processes:
        process.start()
    ddp = queue.get(timeout=120)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert single[-1] < 0.5 * single[0], "the run must actually learn"
    torch.testing.assert_close(torch.tensor(ddp), torch.tensor(single), rtol=1e-5, atol=1e-6)


def test_shard_batch_splits_evenly_or_refuses():
    batch = torch.arange(6)
    assert [shard_batch(batch, r, 3).tolist() for r in range(3)] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="does not split"):
        shard_batch(batch, 0, 4)


def test_optimizer_state_by_name_and_back_is_the_optimizers_own_layout():
    """Two groups (the chunk updates' actor / value), a frozen parameter left out, one parameter
    without state yet: names in group order <-> indices 0, 1, 2 as ``Optimizer.state_dict`` numbers."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))
    model[0].bias.requires_grad_(False)
    optimizer = torch.optim.Adam(
        [{"params": [model[0].weight], "lr": 0.1}, {"params": [model[1].weight, model[1].bias], "lr": 0.2}]
    )
    model(torch.ones(4, 2)).sum().backward()
    model[1].bias.grad = None  # Adam keeps no state for it
    optimizer.step()
    own = optimizer.state_dict()
    named = optimizer_state_by_name(own, model, optimizer)
    assert [group["params"] for group in named["param_groups"]] == [["0.weight"], ["1.weight", "1.bias"]]
    assert sorted(named["state"]) == ["0.weight", "1.weight"]
    assert named["state"]["1.weight"] is own["state"][1]
    back = optimizer_state_by_index(named)
    assert back["param_groups"] == own["param_groups"]
    assert back["state"].keys() == own["state"].keys() == {0, 1}
