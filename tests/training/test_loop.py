"""The one loop with a toy source and algorithm: checkpoints on the interval and at the end, exact
resume (counters, global RNG, algorithm and source state), stop requests, and a failed update that
goes back to the last checkpoint."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vla_rl.config.schema import LoggerConfig
from vla_rl.training.checkpoint import list_checkpoints, load_checkpoint
from vla_rl.training.loop import Run, TrainingLoop


@dataclass
class ToyConfig:
    run_dir: str = ""
    iterations: int = 6
    checkpoint_interval: int = 2
    keep_checkpoints: int = 0
    resume: str | None = None
    seed: int = 3
    torch_num_threads: int = 1
    logger: LoggerConfig = field(
        default_factory=lambda: LoggerConfig(progress_bar=False, tensorboard=False, wandb_mode="disabled")
    )


class DrawSource:
    """Each batch is one draw of the global torch RNG; counts its batches."""

    def __init__(self) -> None:
        self.batches = 0

    def next_batch(self) -> tuple[torch.Tensor, dict[str, float]]:
        self.batches += 1
        return torch.rand(1), {"rollout/batches": float(self.batches)}

    def state_dict(self) -> dict[str, Any]:
        return {"batches": self.batches}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.batches = int(state["batches"])


class Dead(RuntimeError):
    pass


class AddBatch:
    """``update`` adds the batch to the weight; ``fail_at`` raises ``Dead`` once at that update."""

    death_errors = (Dead,)

    def __init__(self, policy: torch.nn.Linear, fail_at: int = 0) -> None:
        self.policy, self.updates, self.fail_at, self.restarts = policy, 0, fail_at, 0

    def update(self, batch: torch.Tensor) -> dict[str, float]:
        if self.updates + 1 == self.fail_at and not self.restarts:
            raise Dead
        with torch.no_grad():
            self.policy.weight += batch
        self.updates += 1
        return {"step": float(batch[0]), "perf/x": 0.0}

    def restart(self) -> None:
        self.restarts += 1

    def state_dict(self) -> dict[str, Any]:
        return {"updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.updates = int(state["updates"])


class ToyLoop(TrainingLoop):
    saves_pretrained = False

    def __init__(self, cfg: ToyConfig, fail_at: int = 0) -> None:
        self.begin(cfg)
        self.policy = torch.nn.utils.skip_init(torch.nn.Linear, 1, 1, bias=False)  # draws nothing
        torch.nn.init.zeros_(self.policy.weight)
        self.algorithm = AddBatch(self.policy, fail_at)
        self.source = DrawSource()
        self.resume(self._find_resume_checkpoint())

    def result(self, run: Run) -> Run:
        return run


def toy(run_dir: Path, fail_at: int = 0, **changes: Any) -> ToyLoop:
    return ToyLoop(ToyConfig(run_dir=str(run_dir), **changes), fail_at)


def test_the_weight_is_the_sum_of_the_draws_and_checkpoints_follow_the_interval(tmp_path: Path) -> None:
    loop = toy(tmp_path, iterations=5)
    run = loop.train()
    torch.manual_seed(3)
    draws = torch.rand(5)
    assert run.stop_reason == "iterations" and loop.iteration == 5
    assert [m["train/step"] for m in run.history] == draws.tolist()
    assert [m["perf/x"] for m in run.history] == [0.0] * 5  # a key with a group keeps it
    assert loop.policy.weight.item() == torch.cumsum(draws, 0)[-1].item()
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == [
        "iter_000002",
        "iter_000004",
        "iter_000005",
    ]
    state = load_checkpoint(tmp_path).trainer_state
    assert (state["iteration"], state["batches"], state["algorithm"]) == (5, 5, {"updates": 5})


def test_a_resumed_run_ends_with_the_weights_of_one_that_never_stopped(tmp_path: Path) -> None:
    straight = toy(tmp_path / "straight")
    straight.train()
    toy(tmp_path / "split", iterations=3).train()
    torch.rand(7)  # draws after the checkpoint must not matter
    resumed = toy(tmp_path / "split", resume="auto")
    assert (resumed.iteration, resumed.source.batches, resumed.algorithm.updates) == (3, 3, 3)
    resumed.train()
    assert torch.equal(resumed.policy.weight, straight.policy.weight)


def test_a_stop_request_ends_after_the_update_with_a_checkpoint(tmp_path: Path) -> None:
    loop = toy(tmp_path, iterations=100, checkpoint_interval=50)
    update = loop.algorithm.update

    def update_then_stop(batch: torch.Tensor) -> dict[str, float]:
        metrics = update(batch)
        if loop.algorithm.updates == 2:
            loop.request_stop()
        return metrics

    loop.algorithm.update = update_then_stop  # type: ignore[method-assign]
    run = loop.train()
    assert run.stop_reason == "interrupted" and loop.iteration == 2
    assert load_checkpoint(tmp_path).iteration == 2


def test_a_failed_update_goes_back_to_the_last_checkpoint_and_the_run_comes_out_the_same(
    tmp_path: Path,
) -> None:
    straight = toy(tmp_path / "straight")
    straight.train()
    failing = toy(tmp_path / "failing", fail_at=4)  # update 4 fails once; checkpoint 2 is the last
    run = failing.train()
    assert failing.algorithm.restarts == 1 and len(run.history) == 6
    assert run.events == [
        "iteration 4: a trainer rank died (Dead); new trainer ranks restarted from checkpoint "
        "iter_000002 (iteration 2)"
    ]
    assert torch.equal(failing.policy.weight, straight.policy.weight)
