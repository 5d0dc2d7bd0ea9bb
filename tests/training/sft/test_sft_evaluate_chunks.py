"""Chunk execution and re-planning by hand; success rates of an expert and a zero policy on MuJoCo reach."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from sft_tiny_policies import ScriptedChunkPolicy, ZeroChunkPolicy, _FixedChunkPolicy

from vla_rl.envs import EnvConfig
from vla_rl.training.evaluate import evaluate
from vla_rl.training.executors import ChunkExecutor, TemporalEnsembleExecutor


class _CountingChunks(_FixedChunkPolicy):
    """Chunk k of world i is [[i, 10k], [i, 10k + 1], ...]: actions tell who planned them and when."""

    def __init__(self) -> None:
        super().__init__(chunk_len=3, action_dim=2)
        self.planned = 0

    def sample(self, obs, **kwargs):  # noqa: ANN001, ANN201
        worlds = obs["proprio"][:, 0]
        self.calls.append(len(worlds))
        chunks = torch.stack(
            [torch.stack([worlds, torch.full_like(worlds, 10.0 * self.planned + j)], -1) for j in range(3)], 1
        )
        self.planned += 1
        from vla_rl.policies.chunk_policy import ChunkStep

        return ChunkStep(actions=chunks / 100.0, log_prob=torch.zeros(len(worlds)))


def _obs(num_worlds: int) -> dict:
    return {
        "proprio": torch.arange(num_worlds, dtype=torch.float32)[:, None],
        "instruction": ["x"] * num_worlds,
    }


def test_executor_runs_the_first_actions_of_each_chunk_then_replans() -> None:
    policy = _CountingChunks()
    executor = ChunkExecutor(policy, num_envs=2, execute_steps=2)
    actions = [executor.act(_obs(2)) * 100 for _ in range(4)]
    # Steps 0, 1 from chunk 0 (values 0, 1); steps 2, 3 from chunk 1 (values 10, 11).
    assert [a[:, 1].tolist() for a in actions] == [[0.0, 0.0], [1.0, 1.0], [10.0, 10.0], [11.0, 11.0]]
    assert actions[0][:, 0].tolist() == [0.0, 1.0]
    assert policy.calls == [2, 2]


def test_executor_replans_only_worlds_whose_episode_ended() -> None:
    policy = _CountingChunks()
    executor = ChunkExecutor(policy, num_envs=3, execute_steps=0)
    assert executor.execute_steps == 3
    executor.act(_obs(3))
    executor.episodes_ended(torch.tensor([False, True, False]))
    second = executor.act(_obs(3)) * 100
    assert policy.calls == [3, 1]
    # World 1 starts chunk 1 (value 10); the others continue chunk 0 (value 1).
    assert second[:, 1].tolist() == [1.0, 10.0, 1.0]
    assert second[:, 0].tolist() == [0.0, 1.0, 2.0]


def test_temporal_ensemble_averages_every_plan_for_the_step_weighted_by_age() -> None:
    policy = _CountingChunks()  # chunk k holds 10k, 10k + 1, 10k + 2
    executor = TemporalEnsembleExecutor(policy, num_envs=2, decay=math.log(2.0))  # weights 1, 2, 4
    actions = [float(executor.act(_obs(2))[0, 1]) * 100 for _ in range(3)]
    # Step 0: chunk 0's first action. Step 1: chunk 0's second (age 1, weight 2) and chunk 1's first
    # (weight 1): (2 x 1 + 10) / 3. Step 2: (4 x 2 + 2 x 11 + 20) / 7.
    assert actions == pytest.approx([0.0, 4.0, 50.0 / 7.0])
    executor.episodes_ended(torch.tensor([False, True]))
    fourth = executor.act(_obs(2))[:, 1] * 100
    # World 0 keeps chunks 1 and 2: (4 x 12 + 2 x 21 + 30) / 7; world 1 has only chunk 3.
    assert fourth.tolist() == pytest.approx([120.0 / 7.0, 30.0])
    assert policy.calls == [2, 2, 2, 2], "every step plans for every world"


def test_temporal_ensemble_scripted_expert_succeeds_on_reach() -> None:
    expert = ScriptedChunkPolicy("reach", chunk_len=2)
    result = evaluate(expert, _reach(), 16, execute_steps=0, seed=3, ensemble_decay=0.0)
    assert result.num_episodes == 16 and result.success_rate >= 0.9


def _reach(num_envs: int = 8) -> EnvConfig:
    return EnvConfig(task="reach", num_envs=num_envs, num_threads=1, max_episode_steps=40)


def test_scripted_expert_succeeds_and_zero_actions_fail_on_reach(tmp_path: Path) -> None:
    expert = ScriptedChunkPolicy("reach", chunk_len=2)
    result = evaluate(expert, _reach(), 16, execute_steps=1, seed=3, summary_path=tmp_path / "s.json")
    assert result.num_episodes == 16 and result.success_rate >= 0.9
    assert 1 <= result.mean_length <= 40
    assert json.loads((tmp_path / "s.json").read_text())["success_rate"] == result.success_rate
    zero = evaluate(ZeroChunkPolicy(chunk_len=4), _reach(), 16, execute_steps=4, seed=3)
    assert zero.num_episodes == 16 and zero.success_rate <= 0.3
    assert zero.mean_length == 40.0


def test_evaluation_leaves_global_rng_and_training_mode_alone() -> None:
    policy = ZeroChunkPolicy(chunk_len=2)
    policy.train()
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    evaluate(policy, _reach(2), 2, execute_steps=2, seed=1)
    assert torch.equal(torch.rand(3), expected)
    assert policy.training


def test_video_of_the_first_episodes_is_written(tmp_path: Path) -> None:
    import imageio.v2 as imageio

    cfg = EnvConfig(task="reach", num_envs=2, num_threads=1, max_episode_steps=6)
    result = evaluate(
        ZeroChunkPolicy(chunk_len=2),
        cfg,
        2,
        execute_steps=2,
        seed=0,
        video_dir=tmp_path,
        video_envs=2,
        video_size=32,
    )
    assert result.video_path == str(tmp_path / "eval.mp4")
    frames = imageio.mimread(result.video_path)
    assert len(frames) == 7 and frames[0].shape == (32, 64, 3)
    assert (tmp_path / "eval_summary.json").is_file()
