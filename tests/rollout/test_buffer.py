import gymnasium as gym
import numpy as np
import pytest
import torch

from vla_rl.rollout import RolloutBuffer

SPACE = gym.spaces.Dict(
    {
        "proprio": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        "rgb_front": gym.spaces.Box(0, 255, (4, 4, 3), np.uint8),
    }
)


def filled_buffer(num_steps: int = 4, num_envs: int = 3) -> RolloutBuffer:
    buffer = RolloutBuffer(num_steps, num_envs, SPACE, action_dim=2)
    for t in range(num_steps):
        ids = torch.arange(num_envs, dtype=torch.float32) + 10 * t  # unique id per transition
        obs = {
            "proprio": ids[:, None].repeat(1, 3),
            "rgb_front": torch.full((num_envs, 4, 4, 3), t, dtype=torch.uint8),
        }
        buffer.add(
            obs,
            action=ids[:, None].repeat(1, 2),
            log_prob=ids,
            value=ids,
            reward=ids,
            done=torch.zeros(num_envs, dtype=torch.bool),
            mean=torch.zeros(num_envs, 2),
            std=torch.ones(num_envs, 2),
        )
    return buffer


def test_storage_is_preallocated_with_space_dtypes():
    buffer = filled_buffer()
    assert buffer.obs["rgb_front"].dtype == torch.uint8
    assert buffer.obs["rgb_front"].shape == (4, 3, 4, 4, 3)
    assert buffer.obs["proprio"].dtype == torch.float32
    assert buffer.full
    with pytest.raises(RuntimeError, match="full"):
        buffer.add({}, *[torch.zeros(1)] * 7)


def test_minibatches_cover_every_transition_once_and_keep_fields_aligned():
    buffer = filled_buffer()
    buffer.compute_returns(torch.zeros(3), gamma=0.9, lam=0.95)
    seen = []
    for batch in buffer.minibatches(3, torch.Generator().manual_seed(0)):
        assert batch["actions"].shape == (4, 2)
        assert batch["obs"]["rgb_front"].shape == (4, 4, 4, 3)
        torch.testing.assert_close(batch["obs"]["proprio"][:, 0], batch["log_probs"])
        torch.testing.assert_close(batch["values"], batch["log_probs"])
        seen += batch["log_probs"].tolist()
    expected = sorted(float(e + 10 * t) for t in range(4) for e in range(3))
    assert sorted(seen) == expected


def test_minibatch_order_depends_on_the_generator_only():
    buffer = filled_buffer()
    first = [b["log_probs"] for b in buffer.minibatches(2, torch.Generator().manual_seed(1))]
    again = [b["log_probs"] for b in buffer.minibatches(2, torch.Generator().manual_seed(1))]
    other = [b["log_probs"] for b in buffer.minibatches(2, torch.Generator().manual_seed(2))]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


def test_obs_keys_restrict_what_is_stored():
    buffer = RolloutBuffer(2, 1, SPACE, action_dim=1, obs_keys=["proprio"])
    assert list(buffer.obs) == ["proprio"]
