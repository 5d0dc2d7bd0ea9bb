"""A chunk policy of length 1 is the state case: the one collector, running the Gaussian MLP as a
``gaussian`` chunk policy of one action, stores what it stores for the same MLP as a state policy,
from the same seed, entry for entry, truncation bootstraps included (both form
``r + gamma * V(final obs)`` in float32). What differs between the two kinds of policy is explicit:
``clamp_actions`` defaults on for state policies and off for chunk policies. Neither changes the
policy's observation statistics while collecting (the algorithm does, after its update)."""

import pytest
import torch
from chunk_fakes import ConstantChunkPolicy, TwoWorldEnv
from rollout_fakes import CountingEnv, LinearValuePolicy

from vla_rl.policies.registry import build_chunk_policy
from vla_rl.rollout import RolloutBuffer, RolloutCollector

STEPS, GAMMA = 5, 0.9


def test_the_collector_at_chunk_length_1_stores_the_state_policys_rollout():
    torch.manual_seed(0)
    policy = build_chunk_policy(
        "gaussian",
        chunk_len=1,
        action_dim=1,
        proprio_dim=1,
        policy={"hidden_sizes": [8], "normalize_obs": False},
    )
    env = CountingEnv()  # world 0's episodes are truncated every 2 steps, world 1's terminate
    state = RolloutBuffer(STEPS, env.num_envs, env.observation_space, action_dim=1)
    torch.manual_seed(1)
    _, state_stats = RolloutCollector(env, policy, state, GAMMA).collect(env.reset()[0])
    torch.manual_seed(1)
    collector = RolloutCollector(CountingEnv(), policy, gamma=GAMMA, execute_steps=1)
    _, chunk_stats = collector.collect(CountingEnv().reset()[0], STEPS)
    chunk = collector.buffer

    assert torch.equal(chunk.sample_info["actions"][:, :, 0], state.actions)
    for name in ("log_probs", "values", "dones", "rewards"):
        assert torch.equal(chunk.stacked(name), getattr(state, name)), name
    assert torch.equal(chunk.last_value, state.last_value)
    assert torch.equal(chunk.stacked("discounts"), torch.full((STEPS, 2), GAMMA))
    bootstrapped = state.dones & torch.tensor([True, False])  # world 0's time-limit steps
    assert bootstrapped.sum() == 2
    # They are bootstrapped: 1 + 0.9 * V(final obs 2) is not the plain reward 1.
    assert (state.rewards[bootstrapped] != 1.0).all()
    # Both count the same 4 episodes (2 steps each; world 1's succeed) with the same float32 means.
    for name in ("episodes", "mean_return", "success_rate"):
        assert getattr(chunk_stats, name) == getattr(state_stats, name), name
    assert chunk_stats.episodes == 4 and chunk_stats.success_rate == 0.5 and chunk_stats.mean_return == 2.0


def test_state_policies_clamp_by_default_and_can_opt_out_and_collecting_leaves_the_statistics():
    # LinearValuePolicy acts 3.0, outside [-1, 1].
    env, policy = CountingEnv(), LinearValuePolicy()
    buffer = RolloutBuffer(2, env.num_envs, env.observation_space, action_dim=1)
    collector = RolloutCollector(env, policy, buffer, GAMMA)
    assert collector.clamp_actions
    collector.collect(env.reset()[0])
    assert [a.tolist() for a in env.actions] == [[[1.0], [1.0]]] * 2
    assert policy.normalizer_updates == 0
    env, policy = CountingEnv(), LinearValuePolicy()
    collector = RolloutCollector(env, policy, buffer, GAMMA, clamp_actions=False)
    collector.collect(env.reset()[0])
    assert [a.tolist() for a in env.actions] == [[[3.0], [3.0]]] * 2
    assert policy.normalizer_updates == 0


class LoudChunkPolicy(ConstantChunkPolicy):
    """Chunks of 3.0 = 6 * 0.5, outside [-1, 1]."""

    def sample(self, obs, **kwargs):
        step = super().sample(obs, **kwargs)
        step.actions = 6.0 * step.actions
        return step


def test_chunk_policies_leave_clamping_to_the_env_unless_asked():
    env, policy = TwoWorldEnv(), LoudChunkPolicy()
    collector = RolloutCollector(env, policy, gamma=0.5, execute_steps=2)
    assert not collector.clamp_actions
    collector.collect(env.reset()[0], num_decisions=1)
    unclamped = torch.cat(env.actions)
    assert torch.equal(unclamped, torch.full((4, 1), 3.0))
    env = TwoWorldEnv()
    RolloutCollector(env, policy, gamma=0.5, execute_steps=2, clamp_actions=True).collect(
        env.reset()[0], num_decisions=1
    )
    assert torch.equal(torch.cat(env.actions), torch.full((4, 1), 1.0))


def test_the_rollout_length_is_the_state_buffers_or_the_chunk_callers():
    env = CountingEnv()
    buffer = RolloutBuffer(2, env.num_envs, env.observation_space, action_dim=1)
    with pytest.raises(ValueError, match="holds the steps of a state policy"):
        RolloutCollector(env, ConstantChunkPolicy(), buffer, GAMMA)
    with pytest.raises(ValueError, match="holds 2 steps, not 3"):
        RolloutCollector(env, LinearValuePolicy(), buffer, GAMMA).collect(env.reset()[0], 3)
    with pytest.raises(ValueError, match="needs num_decisions"):
        RolloutCollector(TwoWorldEnv(), ConstantChunkPolicy(), gamma=0.5).collect(TwoWorldEnv().reset()[0])
