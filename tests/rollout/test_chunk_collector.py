import pytest
import torch
from chunk_fakes import ConstantChunkPolicy, LosesWorldZeroAtThirdStep, TwoWorldEnv

from vla_rl.rollout.collector import RolloutCollector
from vla_rl.rollout.episodes import collect_episodes


def test_continuous_rollout_matches_hand_computation():
    # execute 2 steps per decision, gamma 0.5.
    # Decision 0: both worlds run 2 steps (rewards 1, 1): chunk reward 1 + 0.5 = 1.5, discount 0.25;
    #   world 1 succeeds at its 2nd step.
    # Decision 1: world 0 hits its time limit at the 1st step (V(final) = 10 * 3 = 30 bootstraps:
    #   reward 1 + 0.5 * 30 = 16, discount 0.5) and holds still for the 2nd; world 1: 1.5, 0.25.
    env, policy = TwoWorldEnv(), ConstantChunkPolicy()
    collector = RolloutCollector(env, policy, execute_steps=2, gamma=0.5)
    obs, _ = env.reset()
    _, stats = collector.collect(obs, num_decisions=2)
    batch = collector.buffer
    torch.testing.assert_close(batch.stacked("rewards"), torch.tensor([[1.5, 1.5], [16.0, 1.5]]))
    torch.testing.assert_close(batch.stacked("discounts"), torch.tensor([[0.25, 0.25], [0.5, 0.25]]))
    assert batch.stacked("dones").tolist() == [[False, True], [True, True]]
    torch.testing.assert_close(batch.stacked("values"), torch.tensor([[0.0, 0.0], [20.0, 0.0]]))
    torch.testing.assert_close(batch.last_value, torch.tensor([10.0, 0.0]))  # counts 1 (after the hold) and 0
    assert env.actions[3].tolist() == [[0.0], [0.5]]  # world 0 held still after its episode ended
    assert stats.episodes == 3 and stats.success_rate == pytest.approx(2 / 3)
    assert stats.env_steps == 8 and stats.decisions == 2


def test_execute_steps_must_fit_the_chunk():
    with pytest.raises(ValueError, match="execute_steps"):
        RolloutCollector(TwoWorldEnv(), ConstantChunkPolicy(chunk_len=2), execute_steps=3, gamma=0.9)


def test_reward_scale_multiplies_stored_rewards_not_the_bootstrap_or_episode_returns():
    # As the hand computation above with rewards x 0.1: decision 0 gives 0.1 + 0.5 * 0.1 = 0.15;
    # world 0's time-limit step gives 0.1 + 0.5 * V(final) = 0.1 + 15 = 15.1 (V is already in the
    # critic's scaled units); episode returns in the statistics stay in the environment's units.
    env, policy = TwoWorldEnv(), ConstantChunkPolicy()
    collector = RolloutCollector(env, policy, execute_steps=2, gamma=0.5, reward_scale=0.1)
    obs, _ = env.reset()
    _, stats = collector.collect(obs, num_decisions=2)
    batch = collector.buffer
    torch.testing.assert_close(batch.stacked("rewards"), torch.tensor([[0.15, 0.15], [15.1, 0.15]]))
    reference = RolloutCollector(TwoWorldEnv(), ConstantChunkPolicy(), execute_steps=2, gamma=0.5)
    obs, _ = reference.env.reset()
    _, reference_stats = reference.collect(obs, num_decisions=2)
    assert stats.mean_return == pytest.approx(reference_stats.mean_return)


def test_success_reward_pays_the_success_flag_only():
    # TwoWorldEnv pays 1 per step; world 1 succeeds at its 2nd step (then its next episode starts).
    # reward="success", gamma 0.5, scale 0.1: decision 0: world 0 0 + 0.5 * 0 = 0, world 1 0 + 0.5 * 0.1
    # = 0.05; decision 1: world 0 reaches its time limit at the 1st step (0 + 0.5 * V(final) = 15),
    # world 1 again 0.05.
    env, policy = TwoWorldEnv(), ConstantChunkPolicy()
    collector = RolloutCollector(env, policy, execute_steps=2, gamma=0.5, reward_scale=0.1, reward="success")
    obs, _ = env.reset()
    _, stats = collector.collect(obs, num_decisions=2)
    batch = collector.buffer
    torch.testing.assert_close(batch.stacked("rewards"), torch.tensor([[0.0, 0.05], [15.0, 0.05]]))
    assert stats.success_rate == pytest.approx(2 / 3)


def test_unknown_reward_is_refused():
    with pytest.raises(ValueError, match="reward must be one of"):
        RolloutCollector(TwoWorldEnv(), ConstantChunkPolicy(), execute_steps=2, gamma=0.9, reward="shaped")


class SquaredCountRewardEnv(TwoWorldEnv):
    """TwoWorldEnv paying count^2 (the episode's step count after the step): phi(s_t) = t^2."""

    def step(self, action):
        result = super().step(action)
        result.reward = result.info["final_obs"]["proprio"][:, 0] ** 2
        return result


def test_progress_shaping_adds_the_potential_difference_by_hand():
    # reward="success" plus 2 * (0.5 * phi(s') - phi(s)), phi = t^2, no term on an episode's first step.
    # Decision 0: world 0 steps t=1 (0), t=2 (2 * (0.5 * 4 - 1) = 2): chunk 0 + 0.5 * 2 = 1.0;
    #   world 1 the same plus success 1 at t=2: 0 + 0.5 * 3 = 1.5.
    # Decision 1: world 0 t=3 hits its time limit: 2 * (0.5 * 9 - 4) = 1, plus 0.5 * V(final) = 15:
    #   16 (its hold step is not counted); world 1's new episode: t=1 (0), t=2 (1 + 2): 1.5.
    env, policy = SquaredCountRewardEnv(), ConstantChunkPolicy()
    collector = RolloutCollector(
        env, policy, execute_steps=2, gamma=0.5, reward="success", progress_shaping=2.0
    )
    obs, _ = env.reset()
    collector.collect(obs, num_decisions=2)
    batch = collector.buffer
    torch.testing.assert_close(batch.stacked("rewards"), torch.tensor([[1.0, 1.5], [16.0, 1.5]]))
    # World 0's hold step already began its next episode (t=1, phi 1); world 1 ended (phi unknown).
    assert collector.potential[0].item() == 1.0 and torch.isnan(collector.potential[1])


def test_progress_shaping_sums_to_the_potential_change_over_an_episode():
    # gamma 1: the terms of world 0's 3-step episode telescope to phi(s_3) - phi(s_1) = 9 - 1 = 8.
    env = SquaredCountRewardEnv()
    collector = RolloutCollector(
        env,
        ConstantChunkPolicy(),
        execute_steps=1,
        gamma=1.0,
        with_value=False,
        reward="success",
        progress_shaping=1.0,
    )
    _, _, returns, _ = collect_episodes(collector, [0, 0], max_decisions=3)
    torch.testing.assert_close(returns, torch.tensor([8.0, 1.0 + 3.0]))


def test_images_are_skipped_on_every_step_of_a_chunk_but_the_last():
    env, policy = TwoWorldEnv(), ConstantChunkPolicy(chunk_len=3)
    collector = RolloutCollector(env, policy, execute_steps=3, gamma=0.5)
    obs, _ = env.reset()
    collector.collect(obs, num_decisions=2)
    assert len(env.actions) == 6
    assert env.image_skips == [0, 1, 3, 4]  # steps 2 and 5 end a chunk: decided on


def test_a_lost_step_cuts_the_decision_with_zero_advantage_and_leaves_it_out():
    # Decision 0 of world 0 runs steps 1-2 (chunk reward 1 + 0.5 = 1.5, discount 0.25); decision 1
    # (obs 2, V = 20) loses step 3: it ends there with reward V = 20, not the time limit's bootstrap.
    env, policy = LosesWorldZeroAtThirdStep(), ConstantChunkPolicy()
    collector = RolloutCollector(env, policy, execute_steps=2, gamma=0.5)
    _, stats = collector.collect(env.reset()[0], num_decisions=2)
    batch = collector.buffer
    torch.testing.assert_close(batch.stacked("rewards")[:, 0], torch.tensor([1.5, 20.0]))
    assert batch.stacked("dones")[:, 0].tolist() == [False, True]
    assert batch.stacked("valid").tolist() == [[True, True], [False, True]]
    assert batch.stacked("executed")[1, 0].tolist() == [True, False]
    # A1 = 20 - V1 = 0; A0 = 1.5 + 0.25 * V1 - V0 = 6.5, bootstrapped at the cut.
    advantages, _ = batch.gae(lam=1.0)
    torch.testing.assert_close(advantages[:, 0], torch.tensor([6.5, 0.0]))
    step_advantages, _ = batch.step_gae(gamma=0.5, lam=1.0)
    assert step_advantages[1, 0, 0] == 0.0
    assert env.actions[3].tolist() == [[0.0], [0.5]]  # the restarted world holds still
    # World 1's two episodes count; world 0's cut one does not.
    assert stats.lost_steps == 1 and stats.episodes == 2 and stats.success_rate == 1.0
