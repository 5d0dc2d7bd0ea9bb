"""The replay buffer filled from recorded episodes (``replay_episodes.replay_from_episodes``): transitions,
next observations and episode ends, checked against the episodes' own arrays."""

from __future__ import annotations

import numpy as np
import torch
from data_test_episodes import three_episodes

from vla_rl.data.replay_episodes import replay_from_episodes


def test_from_episodes_pairs_each_step_with_the_next_observation():
    # Episodes of 5 (success), 7 (failure) and 4 (success) steps: 5 + 6 + 4 = 15 transitions (the
    # failed one drops its last action, which has no next observation) over 16 frames.
    episodes = three_episodes(seed=0)
    buffer = replay_from_episodes(episodes)
    assert len(buffer) == 15 and buffer.frames_written == 16
    batch = buffer.gather(buffer.valid_slots())
    starts, rows = [0, 5, 11], [5, 6, 4]
    for episode, start, count in zip(episodes, starts, rows, strict=True):
        part = slice(start, start + count)
        nxt = np.minimum(np.arange(count) + 1, len(episode) - 1)
        assert np.array_equal(batch.action[part].numpy(), episode.actions[:count])
        assert np.array_equal(batch.reward[part].numpy(), episode.rewards[:count])
        assert np.array_equal(batch.obs["proprio"][part].numpy(), episode.proprio[:count])
        assert np.array_equal(batch.next_obs["proprio"][part].numpy(), episode.proprio[nxt])
        assert np.array_equal(batch.next_obs["privileged"][part].numpy(), episode.privileged[nxt])
        for camera in ("front", "wrist"):
            assert np.array_equal(batch.obs[f"rgb_{camera}"][part].numpy(), episode.images[camera][:count])
            assert np.array_equal(batch.next_obs[f"rgb_{camera}"][part].numpy(), episode.images[camera][nxt])
    assert batch.terminated.nonzero().squeeze(1).tolist() == [4, 14]
    assert batch.truncated.nonzero().squeeze(1).tolist() == [10]
    assert batch.obs["rgb_front"].dtype == torch.uint8
    assert not batch.intervention.any()


def test_episodes_that_end_at_a_time_limit_are_truncated_even_when_successful():
    # The same 5 (success), 7 (failure) and 4 (success) steps without terminal successes: every
    # episode drops its last action, 4 + 6 + 3 = 13 transitions, each ending truncated.
    episodes = three_episodes(seed=0)
    buffer = replay_from_episodes(episodes, success_terminates=False)
    assert len(buffer) == 13
    batch = buffer.gather(buffer.valid_slots())
    assert not batch.terminated.any()
    assert batch.truncated.nonzero().squeeze(1).tolist() == [3, 9, 12]
    assert np.array_equal(batch.next_obs["proprio"][3].numpy(), episodes[0].proprio[4])
    assert np.array_equal(batch.action[10:13].numpy(), episodes[2].actions[:3])
