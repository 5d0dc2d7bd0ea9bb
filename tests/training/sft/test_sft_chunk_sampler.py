"""Chunking, padding and masking worked out by hand on a 5-step episode; seeded epochs; exact resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sft_tiny_policies import toy_episodes

from vla_rl.data.episode import Episode
from vla_rl.training.sft.chunk_sampler import ChunkSampler, boundary_frames, chunk_indices


def _five_step_episode(instruction: str = "reach", offset: float = 0.0) -> Episode:
    steps = np.arange(5, dtype=np.float32)
    images = np.zeros((5, 2, 2, 3), dtype=np.uint8)
    images[:, 0, 0, 0] = np.arange(5) * 10
    return Episode(
        images={"front": images},
        proprio=np.stack([steps + offset, -steps], axis=1),
        actions=np.stack([steps / 10 + offset, -steps], axis=1),
        instruction=instruction,
        success=True,
        privileged=(steps[:, None] * 2).astype(np.float32),
    )


def test_chunk_indices_repeat_the_last_action_past_the_end() -> None:
    rows, mask = chunk_indices(5, 0, 3)
    assert rows.tolist() == [0, 1, 2] and mask.tolist() == [True, True, True]
    rows, mask = chunk_indices(5, 3, 3)
    assert rows.tolist() == [3, 4, 4] and mask.tolist() == [True, True, False]
    rows, mask = chunk_indices(5, 4, 3)
    assert rows.tolist() == [4, 4, 4] and mask.tolist() == [True, False, False]


def test_batch_holds_observation_chunk_and_mask_worked_by_hand() -> None:
    sampler = ChunkSampler([_five_step_episode()], chunk_len=3, batch_size=2)
    assert sampler.num_samples == 5
    batch = sampler.collate([3, 0])
    expected_chunks = [
        [[0.3, -3.0], [0.4, -4.0], [0.4, -4.0]],
        [[0.0, 0.0], [0.1, -1.0], [0.2, -2.0]],
    ]
    torch.testing.assert_close(batch.action_chunk, torch.tensor(expected_chunks))
    assert batch.chunk_mask.tolist() == [[True, True, False], [True, True, True]]
    assert batch.action_chunk.dtype == torch.float32 and batch.chunk_mask.dtype == torch.bool
    assert batch.obs["proprio"].tolist() == [[3.0, -3.0], [0.0, 0.0]]
    assert batch.obs["privileged"].tolist() == [[6.0], [0.0]]
    assert batch.obs["rgb_front"].dtype == torch.uint8 and batch.obs["rgb_front"].shape == (2, 2, 2, 3)
    assert batch.obs["rgb_front"][:, 0, 0, 0].tolist() == [30, 0]
    assert batch.obs["instruction"] == ["reach", "reach"]
    assert batch.step_index.tolist() == [3, 0] and batch.episode_index.tolist() == [0, 0]


def test_samples_span_episodes_in_order() -> None:
    sampler = ChunkSampler([_five_step_episode("a"), _five_step_episode("b", offset=100.0)], 2, 4)
    batch = sampler.collate([4, 5, 9])
    assert batch.episode_index.tolist() == [0, 1, 1] and batch.step_index.tolist() == [4, 0, 4]
    assert batch.obs["instruction"] == ["a", "b", "b"]
    torch.testing.assert_close(batch.action_chunk[1], torch.tensor([[100.0, 0.0], [100.1, -1.0]]))
    assert batch.chunk_mask.tolist() == [[True, False], [True, True], [True, False]]


def test_an_epoch_visits_every_full_batch_once_and_the_seed_fixes_the_order() -> None:
    episodes = toy_episodes(3, length=4)
    sampler = ChunkSampler(episodes, 2, batch_size=4, seed=7)
    seen = [(int(e), int(t)) for _ in range(3) for e, t in zip(*_ids(sampler.next_batch()), strict=True)]
    assert sorted(seen) == [(e, t) for e in range(3) for t in range(4)]
    assert sampler.epoch == 0
    sampler.next_batch()
    assert sampler.epoch == 1
    again = ChunkSampler(episodes, 2, batch_size=4, seed=7)
    other = ChunkSampler(episodes, 2, batch_size=4, seed=8)
    first = _ids(again.next_batch())
    assert [(int(e), int(t)) for e, t in zip(*first, strict=True)] == seen[:4]
    assert not all(torch.equal(a, b) for a, b in zip(first, _ids(other.next_batch()), strict=True))


def test_partial_last_batch_is_dropped_and_small_data_gives_whole_batches() -> None:
    sampler = ChunkSampler(toy_episodes(1, length=5), 1, batch_size=2)
    assert sampler.batches_per_epoch == 2
    sampler.next_batch(), sampler.next_batch()
    sampler.next_batch()
    assert sampler.epoch == 1
    whole = ChunkSampler(toy_episodes(1, length=5), 1, batch_size=64)
    assert whole.batch_size == 5 and sorted(whole.next_batch().step_index.tolist()) == [0, 1, 2, 3, 4]


def test_state_dict_resumes_the_exact_batch_sequence() -> None:
    episodes = toy_episodes(2, length=5)
    straight = ChunkSampler(episodes, 3, batch_size=3, seed=1)
    expected = [_ids(straight.next_batch()) for _ in range(7)]
    first = ChunkSampler(episodes, 3, batch_size=3, seed=1)
    got = [_ids(first.next_batch()) for _ in range(4)]
    resumed = ChunkSampler(episodes, 3, batch_size=3, seed=99)
    resumed.load_state_dict(first.state_dict())
    got += [_ids(resumed.next_batch()) for _ in range(3)]
    for a, b in zip(expected, got, strict=True):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="same dataset"):
        ChunkSampler(episodes[:1], 3, batch_size=3).load_state_dict(first.state_dict())


def test_inconsistent_episodes_are_rejected() -> None:
    good = _five_step_episode()
    no_privileged = _five_step_episode()
    no_privileged.privileged = None
    with pytest.raises(ValueError, match="privileged"):
        ChunkSampler([good, no_privileged], 2, 2)
    with pytest.raises(ValueError, match="no demonstration"):
        ChunkSampler([], 2, 2)


def _ids(batch) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001 - ChunkBatch
    return batch.episode_index, batch.step_index


def test_obs_transform_adds_derived_keys_to_every_batch() -> None:
    def add_double(obs: dict) -> dict:
        obs["double"] = obs["privileged"] * 2
        return obs

    sampler = ChunkSampler([_five_step_episode()], chunk_len=2, batch_size=5, obs_transform=add_double)
    batch = sampler.collate([0, 3])
    # privileged at steps 0 and 3 is 2 * step: 0 and 6; doubled 0 and 12.
    assert batch.obs["double"][:, 0].tolist() == [0.0, 12.0]


def test_object_state_transform_of_a_task_matches_the_simulator_slice() -> None:
    from vla_rl.sims.tasks.registry import object_state_transform

    add = object_state_transform("push")
    privileged = torch.arange(10, dtype=torch.float32)[None]  # cube_pos 0..2, target_xy 3..4, ...
    assert add({"privileged": privileged})["objects"].tolist() == [[0.0, 1.0, 2.0, 3.0, 4.0]]
    assert object_state_transform("not_a_task") is None


def test_boundary_frames_mark_episode_and_gripper_segment_starts() -> None:
    gripper = np.array([1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, 1.0])[:, None]
    actions = np.concatenate([np.zeros((8, 3)), gripper], axis=1)
    # segments start at 0 (episode), 4 (close) and 7 (open again); window 2
    assert boundary_frames(actions, -1, 2).astype(int).tolist() == [1, 1, 0, 0, 1, 1, 0, 1]
    assert boundary_frames(actions, 3, 1).astype(int).tolist() == [1, 0, 0, 0, 1, 0, 0, 1]


def test_boundary_repeats_list_decision_frames_more_often_per_epoch() -> None:
    episode = _five_step_episode()
    episode.actions[:, 1] = [1.0, 1.0, 1.0, -1.0, -1.0]  # the gripper closes at step 3
    sampler = ChunkSampler([episode], chunk_len=2, batch_size=1, boundary_repeats=3, boundary_window=1)
    # steps 0 and 3 start segments: 3 + 1 + 1 + 3 + 1 = 9 samples per epoch
    assert sampler.num_samples == 9
    assert np.bincount(sampler.sample_step).tolist() == [3, 1, 1, 3, 1]
    drawn = [int(sampler.next_batch().step_index[0]) for _ in range(9)]
    assert sorted(drawn) == [0, 0, 0, 1, 2, 3, 3, 3, 4]
    uniform = ChunkSampler([episode], chunk_len=2, batch_size=1)
    assert uniform.num_samples == 5


def test_bad_boundary_settings_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="boundary_repeats must be >= 1"):
        ChunkSampler([_five_step_episode()], chunk_len=2, batch_size=1, boundary_repeats=0)
