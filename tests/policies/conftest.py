"""Shared by the policy families' tests (pytest puts this folder on the path of its subfolders)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch


def train_on_one_step_bandit(
    policy, obs: dict, target: torch.Tensor, steps: int, trained: list[torch.nn.Parameter], **sample_kwargs
) -> None:
    """Policy-gradient steps on a one-step bandit: reward = minus the squared distance of the
    sampled chunk from ``target``, advantages standardised over the batch (as GRPO does per group),
    loss = -A * log p of each chunk (``log_prob_level="chunk"``); Adam at 1e-3, gradient norm 1."""
    optimizer = torch.optim.Adam(trained, lr=1e-3)
    torch.manual_seed(0)
    for _ in range(steps):
        with torch.no_grad():
            step = policy.sample(obs, **sample_kwargs)
            reward = -((step.actions - target) ** 2).mean(dim=(1, 2))
            advantages = (reward - reward.mean()) / (reward.std() + 1e-8)
        log_prob = policy.evaluate(obs, step.sample_info, log_prob_level="chunk").log_prob
        loss = -(advantages * log_prob).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()


@pytest.fixture
def train_on_bandit() -> Callable[..., None]:
    return train_on_one_step_bandit
