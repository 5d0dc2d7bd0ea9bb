import math

import torch
from rollout_fakes import CountingEnv, LinearValuePolicy

from vla_rl.rollout import RolloutBuffer, RolloutCollector


def collect_three_steps():
    env = CountingEnv()
    policy = LinearValuePolicy()
    buffer = RolloutBuffer(3, env.num_envs, env.observation_space, env.action_dim)
    collector = RolloutCollector(env, policy, buffer, gamma=0.9)
    obs, _ = env.reset()
    next_obs, stats = collector.collect(obs)
    return env, policy, buffer, next_obs, stats


def test_truncation_bootstraps_from_final_obs_and_termination_does_not():
    _, _, buffer, next_obs, _ = collect_three_steps()
    # Step 1 ends both episodes with final obs 2: the truncated world 0 gets 1 + 0.9 * V(2) = 1 + 0.9 * 20.
    torch.testing.assert_close(buffer.rewards, torch.tensor([[1.0, 1.0], [19.0, 1.0], [1.0, 1.0]]))
    assert buffer.dones.tolist() == [[False, False], [True, True], [False, False]]
    torch.testing.assert_close(buffer.values[:, 0], torch.tensor([0.0, 10.0, 0.0]))
    torch.testing.assert_close(buffer.last_value, torch.tensor([10.0, 10.0]))
    torch.testing.assert_close(next_obs["proprio"][:, 0], torch.tensor([1.0, 1.0]))

    buffer.compute_returns(buffer.last_value, gamma=0.9, lam=1.0)
    # World 0: R0 = 1 + 0.9 * (1 + 0.9 * V(2)) = 18.1 — as if the episode had gone on.
    # World 1: R0 = 1 + 0.9 * 1 = 1.9, R1 = 1 (terminal), R2 = 1 + 0.9 * V(1) = 10.
    torch.testing.assert_close(buffer.returns, torch.tensor([[18.1, 1.9], [19.0, 1.0], [10.0, 10.0]]))


def test_actions_are_clipped_for_the_env_but_stored_unclipped():
    env, policy, buffer, _, _ = collect_three_steps()
    assert all(torch.equal(a, torch.ones(2, 1)) for a in env.actions)
    assert torch.equal(buffer.actions, torch.full((3, 2, 1), 3.0))
    assert policy.normalizer_updates == 0  # collecting leaves the observation statistics alone


def test_stats_count_finished_episodes():
    _, _, _, _, stats = collect_three_steps()
    assert stats.episodes == 2
    assert stats.mean_return == 2.0
    assert stats.mean_length == 2.0
    assert stats.success_rate == 0.5
    assert stats.success_once_rate == 0.5
    assert stats.env_steps == 6
    assert stats.rollout_time_s >= stats.sim_time_s + stats.policy_time_s > 0


def test_nan_stats_without_episodes():
    env = CountingEnv()
    policy = LinearValuePolicy()
    buffer = RolloutBuffer(1, env.num_envs, env.observation_space, env.action_dim)
    obs, _ = env.reset()
    _, stats = RolloutCollector(env, policy, buffer, gamma=0.9).collect(obs)
    assert stats.episodes == 0 and math.isnan(stats.mean_return)


def test_pipelined_collection_of_a_staged_env_fills_each_stage_as_the_plain_collection_does():
    from vla_rl.envs.staged import StagedEnv

    env = StagedEnv([CountingEnv(), CountingEnv()])
    policy = LinearValuePolicy()
    buffer = RolloutBuffer(3, env.num_envs, env.observation_space, env.action_dim)
    collector = RolloutCollector(env, policy, buffer, gamma=0.9)
    obs, _ = env.reset()
    next_obs, stats = collector.collect(obs)
    # Each stage holds the two worlds of `collect_three_steps`, filled step by step.
    torch.testing.assert_close(
        buffer.rewards, torch.tensor([[1.0, 1.0, 1.0, 1.0], [19.0, 1.0, 19.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    )
    assert buffer.dones[1].tolist() == [True] * 4 and not buffer.dones[0].any() and not buffer.dones[2].any()
    torch.testing.assert_close(
        buffer.obs["proprio"][:, :, 0], torch.tensor([[0.0] * 4, [1.0] * 4, [0.0] * 4])
    )
    torch.testing.assert_close(buffer.last_value, torch.full((4,), 10.0))
    torch.testing.assert_close(next_obs["proprio"][:, 0], torch.ones(4))
    assert buffer.full and stats.episodes == 4 and stats.success_rate == 0.5
    # 3 steps per stage, each stage stepped with its own rows' actions (clipped to 1.0)
    assert [len(stage.actions) for stage in env.stages] == [3, 3]
    assert all(a.shape == (2, 1) and (a == 1.0).all() for stage in env.stages for a in stage.actions)
    assert policy.normalizer_updates == 0  # collecting leaves the observation statistics alone


class LosesWorldZeroAtSecondStep(CountingEnv):
    """World 0's second step never runs (its env worker died): a fresh episode, marked lost."""

    calls = 0

    def step(self, action: torch.Tensor):
        result = super().step(action)
        self.calls += 1
        result.info["lost"] = torch.tensor([self.calls == 2, False])
        if self.calls == 2:
            self.count[0] = 0
            result.obs["proprio"][0] = 0.0
            result.reward[0], result.truncated[0], result.terminated[0] = 0.0, True, False
        return result


def test_a_lost_step_cuts_the_trajectory_with_zero_advantage_and_is_left_out():
    env = LosesWorldZeroAtSecondStep()
    buffer = RolloutBuffer(3, env.num_envs, env.observation_space, env.action_dim)
    collector = RolloutCollector(env, LinearValuePolicy(), buffer, gamma=0.9)
    _, stats = collector.collect(env.reset()[0])
    # World 0: step 1 was lost at obs 1 (V = 10): reward := V = 10, not the truncation bootstrap
    # 1 + 0.9 * V(2) = 19; the step ends the trajectory and is marked invalid.
    torch.testing.assert_close(buffer.rewards[:, 0], torch.tensor([1.0, 10.0, 1.0]))
    assert buffer.dones[:, 0].tolist() == [False, True, False]
    assert buffer.valid.tolist() == [[True, True], [False, True], [True, True]]
    buffer.compute_returns(buffer.last_value, gamma=0.9, lam=1.0)
    # R2 = 1 + 0.9 * V(1) = 10, R1 = 10, R0 = 1 + 0.9 * 10 = 10: the lost step's advantage is
    # 10 - V(1) = 0, and step 0 is bootstrapped from V(1) at the cut.
    torch.testing.assert_close(buffer.returns[:, 0], torch.tensor([10.0, 10.0, 10.0]))
    torch.testing.assert_close(buffer.advantages[:, 0], torch.tensor([10.0, 0.0, 10.0]))
    # World 1's episode counts; world 0's cut one does not.
    assert stats.lost_steps == 1 and stats.episodes == 1
