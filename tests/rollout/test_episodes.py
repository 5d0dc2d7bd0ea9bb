"""GRPO's episode mode: one episode per world from shared reset seeds, checked by hand on the fakes
of ``chunk_fakes``."""

import torch
from chunk_fakes import ConstantChunkPolicy, LosesWorldZeroAtThirdStep, TwoWorldEnv

from vla_rl.rollout.collector import RolloutCollector
from vla_rl.rollout.episodes import collect_episodes, sample_active


def test_episode_rollout_masks_entries_after_the_end_and_scores_each_world():
    env, policy = TwoWorldEnv(), ConstantChunkPolicy()
    collector = RolloutCollector(env, policy, execute_steps=2, gamma=1.0, with_value=False)
    batch, success, returns, _ = collect_episodes(collector, [7, 7], max_decisions=10)
    assert env.reset_seeds == [[7, 7]]
    assert batch.num_decisions == 2  # world 0 needs two decisions (3 steps), world 1 one
    assert batch.stacked("valid").tolist() == [[True, True], [True, False]]
    assert success.tolist() == [False, True]
    torch.testing.assert_close(returns, torch.tensor([3.0, 2.0]))
    flat = batch.flat({}).valid_rows()
    assert len(flat) == 3
    torch.testing.assert_close(flat.tensors["old_log_prob"], torch.tensor([0.0, 0.0, -2.0]))


def test_an_episode_rollout_marks_a_world_whose_episode_was_cut_short():
    env, policy = LosesWorldZeroAtThirdStep(), ConstantChunkPolicy()
    collector = RolloutCollector(env, policy, execute_steps=2, gamma=1.0, with_value=False)
    batch, success, _, stats = collect_episodes(collector, [7, 7], max_decisions=10)
    assert batch.lost.tolist() == [True, False] and success.tolist() == [False, True]
    assert batch.stacked("valid").tolist() == [[True, True], [False, False]]
    assert stats.episodes == 1 and stats.lost_steps == 1


def test_sample_active_asks_only_the_active_worlds_and_leaves_zeros_elsewhere():
    asked = []

    class RecordingPolicy(ConstantChunkPolicy):
        def sample(self, obs, **kwargs):
            asked.append(obs["proprio"][:, 0].tolist())
            return super().sample(obs, **kwargs)

    collector = RolloutCollector(TwoWorldEnv(), RecordingPolicy(), execute_steps=2, gamma=1.0)
    obs = {"proprio": torch.tensor([[4.0], [6.0]]), "instruction": ["a", "b"]}
    step = sample_active(collector, obs, torch.tensor([False, True]))
    assert asked == [[6.0]]
    assert step.actions[:, 0, 0].tolist() == [0.0, 0.5]
    assert step.log_prob.tolist() == [0.0, -6.0] and step.value.tolist() == [0.0, 60.0]
    assert step.sample_info["proprio"].tolist() == [0.0, 6.0]
