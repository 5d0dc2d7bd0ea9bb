"""Trainer groups on gloo: DDP and FSDP2 follow the single trainer's loss curve for the same global
batch, and a group whose rank dies restarts from its last checkpoint and finishes the same curve."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from vla_rl.distributed.runtime import InProcessRuntime, Resources
from vla_rl.distributed.trainer_group import TrainerGroup, TrainerGroupConfig, TrainerRank, TrainTask
from vla_rl.policies import PolicyConfig, build_policy

STEPS = 24
OBS_SPACE = gym.spaces.Dict({"proprio": gym.spaces.Box(-np.inf, np.inf, (6,), np.float32)})
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


class BehaviourCloningLoss(torch.nn.Module):
    """forward(batch) = -mean log-likelihood of the expert's actions under the policy + the critic's
    squared error on the expert's returns (every parameter gets a gradient, as DDP requires)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)  # every rank builds the same initial weights
        cfg = PolicyConfig(actor_obs_keys=["proprio"], critic_obs_keys=["proprio"], hidden_sizes=[32, 32])
        self.policy = build_policy(cfg, OBS_SPACE, ACTION_SPACE)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        log_prob, _, value, _, _ = self.policy.evaluate_actions({"proprio": batch["obs"]}, batch["actions"])
        return -log_prob.mean() + (value - batch["returns"]).square().mean()


class CloneExpert(TrainTask):
    """The real MLP policy cloned from a linear expert; step s draws 64 of 512 states with seed s."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(1)
        self.obs = torch.randn(512, 6, generator=generator)
        self.actions = torch.tanh(self.obs @ torch.randn(6, 3, generator=generator))
        self.returns = self.actions.sum(-1)

    def build_model(self) -> torch.nn.Module:
        return BehaviourCloningLoss()

    def build_optimizer(self, parameters):
        return torch.optim.Adam(parameters, lr=3e-3)

    def batch(self, step: int) -> dict[str, torch.Tensor]:
        index = torch.randperm(512, generator=torch.Generator().manual_seed(step))[:64]
        return {"obs": self.obs[index], "actions": self.actions[index], "returns": self.returns[index]}


def _train(runtime, run_dir: Path, rank_cls: type = TrainerRank, **cfg):
    group = TrainerGroup(
        runtime,
        CloneExpert(),
        TrainerGroupConfig(run_dir=str(run_dir), checkpoint_interval=5, **cfg),
        resources=Resources(num_cpus=0),
        rank_cls=rank_cls,
    )
    return group.train(STEPS)


@pytest.fixture(scope="module")
def single_trainer_losses(tmp_path_factory) -> list[float]:
    result = _train(InProcessRuntime(), tmp_path_factory.mktemp("single"), world_size=1, strategy="none")
    assert result.losses[-1] < 0.8 * result.losses[0], "the run must actually learn"
    return result.losses


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_two_gloo_ranks_follow_the_single_trainer(strategy, single_trainer_losses, ray_runtime, tmp_path):
    """Tolerance 1e-5 relative: two shards' means averaged sum in another order than one mean."""
    result = _train(ray_runtime, tmp_path, world_size=2, strategy=strategy)
    assert result.events == []
    torch.testing.assert_close(
        torch.tensor(result.losses), torch.tensor(single_trainer_losses), rtol=1e-5, atol=1e-6
    )


def _crashing_rank(marker: Path, at_step: int) -> type:
    class CrashingRank(TrainerRank):
        """Rank 1's process exits at step ``at_step`` the first time (``marker`` records it)."""

        def train_steps(self, first_step: int, count: int) -> list[float]:
            if self.rank == 1 and first_step <= at_step < first_step + count and not marker.exists():
                super().train_steps(first_step, at_step - first_step)  # steps before the crash
                marker.touch()
                os._exit(1)
            return super().train_steps(first_step, count)

    return CrashingRank


@pytest.mark.slow
def test_a_dead_rank_restarts_the_group_from_its_last_checkpoint(
    single_trainer_losses, ray_runtime, tmp_path
):
    rank_cls = _crashing_rank(tmp_path / "crashed", at_step=13)
    result = _train(ray_runtime, tmp_path / "run", rank_cls=rank_cls, world_size=2, strategy="ddp")
    assert result.restarts == 1
    assert result.events == [
        "a trainer rank died (ActorDiedError) during steps 10..14; "
        "the group restarted from the checkpoint of step 10"
    ]
    # Steps 10-14 were redone from the checkpoint: the curve is the uninterrupted one.
    torch.testing.assert_close(
        torch.tensor(result.losses), torch.tensor(single_trainer_losses), rtol=1e-5, atol=1e-6
    )
    checkpoints = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert checkpoints == ["iter_000020", "iter_000024", "latest"]  # the newest two are kept
