"""The SFT algorithm's step on a one-parameter policy, against numbers worked out by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vla_rl.algorithms.registry import algorithm_class
from vla_rl.policies.chunk_policy import SFTOutput
from vla_rl.training.sft.config import SFTOptimConfig


class OneWeight(torch.nn.Module):
    """``sft_loss``: ``(w - mean(action_chunk))**2``."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(()))

    def sft_loss(self, obs, action_chunk, chunk_mask):  # noqa: ANN001, ANN201
        loss = (self.w - action_chunk.mean()).square()
        return SFTOutput(loss=loss, metrics={"target": float(action_chunk.mean())})


def batch(target: float) -> SimpleNamespace:
    return SimpleNamespace(
        obs={"proprio": torch.zeros(1, 2)},
        action_chunk=torch.full((1, 2, 1), target),
        chunk_mask=torch.ones(1, 2, dtype=torch.bool),
    )


def sft(policy: OneWeight, **optim: float):  # noqa: ANN201
    return algorithm_class("sft")(policy, SFTOptimConfig(**optim), 4, torch.device("cpu"))


def test_one_step_averages_the_minibatches_clips_and_warms_up() -> None:
    policy = OneWeight()
    algorithm = sft(policy, learning_rate=0.1, warmup_steps=2, grad_clip_norm=1.0)
    metrics = algorithm.update([batch(1.0), batch(3.0)])
    # loss (1 + 9) / 2 = 5; gradient (2(0-1) + 2(0-3)) / 2 = -4, clipped to -1; the first step's
    # rate is 0.1 * 1/2 (warm-up); Adam's first step moves by the rate against the gradient's sign.
    assert metrics == pytest.approx({"loss": 5.0, "target": 2.0, "grad_norm": 4.0, "learning_rate": 0.05})
    assert float(policy.w.detach()) == pytest.approx(0.05)
    assert algorithm.update([batch(1.0)])["learning_rate"] == pytest.approx(0.1)


def test_state_round_trips_the_optimizer_and_the_schedule() -> None:
    first = sft(OneWeight(), learning_rate=0.1, warmup_steps=2)
    first.update([batch(1.0)])
    second = sft(OneWeight(), learning_rate=0.1, warmup_steps=2)
    second.load_state_dict(first.state_dict())
    assert second.update([batch(1.0)])["learning_rate"] == pytest.approx(0.1)
    assert second.optimizer.state_dict()["state"][0]["step"] == 2


def test_a_policy_without_trainable_parameters_is_refused() -> None:
    policy = OneWeight().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        sft(policy)
