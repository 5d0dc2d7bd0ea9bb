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


def add_decision(buffer: RolloutBuffer, t: int, with_value: bool = True) -> None:
    """Decision ``t`` of 2 worlds: ids 10 * t + world, per-action log-probs [2, 3] in bfloat16."""
    ids = torch.arange(2, dtype=torch.float32) + 10 * t
    buffer.add_decision(
        {"proprio": ids[:, None].repeat(1, 3), "instruction": [f"task {t}", f"task {t}"]},
        {"noise": ids[:, None, None].repeat(1, 4, 2)},
        ids[:, None].repeat(1, 3).to(torch.bfloat16),
        ids if with_value else None,
        ids,
        torch.full((2,), 0.5),
        torch.tensor([False, t == 1]),
        torch.tensor([True, t < 2]),
    )


def test_a_chunk_rollout_allocates_its_fields_on_the_first_decision():
    buffer = RolloutBuffer(num_steps=5, num_envs=2)
    for t in range(3):  # stops before the 5 it has room for, as GRPO's episodes do
        add_decision(buffer, t)
    assert buffer.num_decisions == 3
    assert buffer.sample_info["noise"].shape == (5, 2, 4, 2)
    assert buffer.log_probs.dtype == torch.bfloat16 and buffer.log_probs.shape == (5, 2, 3)
    assert buffer.stacked("rewards").tolist() == [[0.0, 1.0], [10.0, 11.0], [20.0, 21.0]]
    assert buffer.stacked("dones").tolist() == [[False, False], [False, True], [False, False]]
    assert buffer.discounts[:3].eq(0.5).all()
    flat = buffer.flat({"advantages": torch.arange(6.0).view(3, 2)})
    # Decision-major rows: (decision 0, world 0), (0, 1), (1, 0), ...
    assert flat.obs["proprio"][:, 0].tolist() == [0.0, 1.0, 10.0, 11.0, 20.0, 21.0]
    assert flat.obs["instruction"] == ["task 0", "task 0", "task 1", "task 1", "task 2", "task 2"]
    assert flat.sample_info["noise"][:, 0, 0].tolist() == [0.0, 1.0, 10.0, 11.0, 20.0, 21.0]
    assert flat.tensors["valid"].tolist() == [True, True, True, True, True, False]
    assert flat.tensors["old_value"].tolist() == [0.0, 1.0, 10.0, 11.0, 20.0, 21.0]
    assert flat.tensors["advantages"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_chunk_rollout_without_a_critic_stores_no_values():
    buffer = RolloutBuffer(num_steps=2, num_envs=2)
    for t in range(2):
        add_decision(buffer, t, with_value=False)
    assert buffer.values is None and "old_value" not in buffer.flat({}).tensors
    with pytest.raises(ValueError, match="critic's values"):
        buffer.gae(lam=0.95)
    with pytest.raises(RuntimeError, match="full"):
        add_decision(buffer, 2)
