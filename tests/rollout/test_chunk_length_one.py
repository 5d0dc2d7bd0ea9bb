"""A chunk policy of length 1 is the state case: the chunk collector, running the Gaussian MLP wrapped
as a ``gaussian`` chunk policy of one action, stores what the state collector stores for the MLP
itself, from the same seed, entry for entry. The one difference is the rounding of the truncation
bootstrap ``r + gamma * V(final obs)``: the state collector forms ``gamma * V`` in float32, the chunk
collector in float64 before adding it, so the two can differ in the last bit of float32. (Two more
differences are out of this test's sight: the state collector clamps the action it sends to the env
to [-1, 1] where the chunk collector leaves that to the env, and it updates the policy's observation
normaliser while collecting where the chunk collector does not; the policy here normalises nothing.)"""

import torch
from rollout_fakes import CountingEnv

from vla_rl.policies.registry import build_chunk_policy
from vla_rl.rollout import RolloutBuffer, RolloutCollector
from vla_rl.rollout.chunk_collector import ChunkCollector

STEPS, GAMMA = 5, 0.9


def test_the_chunk_collector_at_chunk_length_1_stores_the_state_collectors_rollout():
    torch.manual_seed(0)
    wrapped = build_chunk_policy(
        "gaussian",
        chunk_len=1,
        action_dim=1,
        proprio_dim=1,
        policy={"hidden_sizes": [8], "normalize_obs": False},
    )
    env = CountingEnv()  # world 0's episodes are truncated every 2 steps, world 1's terminate
    state = RolloutBuffer(STEPS, env.num_envs, env.observation_space, action_dim=1)
    torch.manual_seed(1)
    RolloutCollector(env, wrapped.policy, state, GAMMA).collect(env.reset()[0])
    torch.manual_seed(1)
    chunk, _, _ = ChunkCollector(CountingEnv(), wrapped, execute_steps=1, gamma=GAMMA).collect(
        CountingEnv().reset()[0], STEPS
    )

    assert torch.equal(chunk.sample_info["actions"][:, :, 0], state.actions)
    for name in ("log_probs", "values", "dones"):
        assert torch.equal(chunk.stacked(name), getattr(state, name)), name
    assert torch.equal(chunk.last_value, state.last_value)
    assert torch.equal(chunk.stacked("discounts"), torch.full((STEPS, 2), GAMMA))
    bootstrapped = state.dones & torch.tensor([True, False])  # world 0's time-limit steps
    assert bootstrapped.sum() == 2
    assert torch.equal(chunk.stacked("rewards")[~bootstrapped], state.rewards[~bootstrapped])
    torch.testing.assert_close(
        chunk.stacked("rewards")[bootstrapped], state.rewards[bootstrapped], rtol=1.2e-7, atol=0
    )
    # And they are bootstrapped: 1 + 0.9 * V(final obs 2) is not the plain reward 1.
    assert (state.rewards[bootstrapped] != 1.0).all()
