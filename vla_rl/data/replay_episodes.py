"""Recorded episodes in a replay buffer: demonstrations (RLPD's offline half) and takeovers, each
step a transition from its observation to the next one (``ReplayBuffer.add_trajectory``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from vla_rl.data.episode import Episode, env_observation
from vla_rl.data.replay_buffer import IMAGE_PREFIX, ReplayBuffer


def episode_observations(episode: Episode) -> dict[str, torch.Tensor]:
    """An episode's observations [T, ...] under the env's keys (``episode.env_observation``), its
    images checked to be uint8."""
    obs = env_observation(episode.images, episode.proprio, episode.privileged)
    for key, value in obs.items():
        if key.startswith(IMAGE_PREFIX) and value.dtype != torch.uint8:
            raise ValueError(f"episode images {key!r} are {value.dtype}, expected uint8")
    return obs


def add_episode(
    buffer: ReplayBuffer, episode: Episode, intervention: bool = False, success_terminates: bool = True
) -> int:
    """Store a recorded episode's transitions in ``buffer``; returns how many.

    Step ``t`` goes from the observation at ``t`` to the one at ``t + 1``. An episode records no
    observation after its last action. When ``success_terminates`` (the episode ended because it
    succeeded), a successful episode's last step is terminated and points at its own observation as
    ``next_obs`` (never bootstrapped); any other episode (every episode when ``success_terminates``
    is off: it ended at a time limit) drops its last action and is truncated at the step before
    (bootstrapped from its last observation). ``intervention`` marks every step (e.g. for human
    takeovers)."""
    length = len(episode)
    if episode.rewards is None:
        raise ValueError("an episode without rewards cannot fill a replay buffer (set episode.rewards)")
    terminal = bool(episode.success) and success_terminates
    count = length if terminal else length - 1
    if count <= 0:
        return 0
    frames = episode_observations(episode)
    for key, value in frames.items():
        if len(value) != length:
            raise ValueError(f"episode has {len(value)} rows of {key!r} for {length} actions")
    actions, rewards = np.asarray(episode.actions), np.asarray(episode.rewards)
    if len(actions) != length or rewards.shape != (length,):
        raise ValueError(f"episode has {len(actions)} actions and {rewards.shape} rewards for {length} steps")
    ends = torch.zeros(count, dtype=torch.bool)
    ends[-1] = True
    buffer.add_trajectory(
        frames,
        torch.from_numpy(actions[:count]),
        torch.from_numpy(rewards[:count]),
        terminated=ends if terminal else torch.zeros_like(ends),
        truncated=torch.zeros_like(ends) if terminal else ends,
        intervention=torch.full((count,), intervention, dtype=torch.bool),
    )
    return count


def replay_from_episodes(
    episodes: Sequence[Episode],
    capacity: int | None = None,
    num_envs: int = 1,
    device: str | torch.device = "cpu",
    intervention: bool = False,
    obs_keys: Sequence[str] | None = None,
    success_terminates: bool = True,
) -> ReplayBuffer:
    """A buffer holding ``episodes`` (``add_episode``, with ``intervention`` and
    ``success_terminates``); ``capacity`` defaults to their transitions, more leaves room for online
    steps of ``num_envs`` worlds."""
    if not episodes:
        raise ValueError("no episodes to fill a replay buffer with")
    frames = sum(len(episode) for episode in episodes)
    terminal = [bool(episode.success) and success_terminates for episode in episodes]
    total = sum(len(episode) - (not ends) for episode, ends in zip(episodes, terminal, strict=True))
    capacity = max(total, num_envs) if capacity is None else capacity
    frame_capacity = capacity + 2 * num_envs + frames - total
    buffer = ReplayBuffer(capacity, num_envs, device=device, frame_capacity=frame_capacity, obs_keys=obs_keys)
    for episode in episodes:
        add_episode(buffer, episode, intervention, success_terminates)
    return buffer
