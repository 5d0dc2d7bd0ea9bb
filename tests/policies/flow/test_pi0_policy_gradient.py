"""The likelihood of pi0's sampled denoising chain points the policy towards rewarded actions.

A one-step bandit: 32 observations, reward = minus the squared distance of the sampled chunk from a
fixed target, advantages standardised over the batch (as GRPO does per group), loss = -A * log p of
each chain. If the chain's log-probability or its gradient were wrong (sign, missing the velocity
network's parameters, padding dimensions), the greedy (ODE) actions would not approach the target.
"""

from __future__ import annotations

import pytest
import torch
from flow_fixtures import make_obs, make_pi0

TARGET = torch.tensor([0.5, -0.5, 0.3, 0.0])
STEPS = 60


def greedy_error(policy) -> float:
    with torch.no_grad():
        torch.manual_seed(123)  # the same initial noise for every measurement
        actions = policy.sample(make_obs(32, seed=1), deterministic=True).actions
    return float(((actions - TARGET) ** 2).mean())


@pytest.mark.parametrize(
    "exploration", [{"exploration": "flow_sde", "noise_level": 0.3}, {"exploration": "flow_noise"}]
)
def test_policy_gradient_moves_greedy_actions_towards_the_rewarded_target(exploration, train_on_bandit):
    policy = make_pi0(seed=0, **exploration)
    before = greedy_error(policy)
    trained = [p for name, p in policy.named_parameters() if not name.startswith("model.model.vlm.")]
    train_on_bandit(policy, make_obs(32, seed=1), TARGET, STEPS, trained, deterministic=False)
    # Measured (60 steps): 0.641 -> 0.402 (flow_sde), 0.641 -> 0.407 (flow_noise).
    assert greedy_error(policy) < 0.8 * before
