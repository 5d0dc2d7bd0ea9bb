"""Supervised samples from demonstrations: the observation at step t and the action chunk a[t : t+L].

Each (episode, step) pair is one sample. The observation comes in the environment's batched format
(``"rgb_<camera>"`` uint8 [B, H, W, 3], ``"proprio"`` f32 [B, P], ``"privileged"`` f32 [B, K] when
recorded, ``"instruction"`` list of B strings) so a policy sees the same inputs in training and in
the simulator. Steps of the chunk that fall past the episode end repeat the last action and are
marked False in ``chunk_mask`` so that losses can ignore them.

Recorded deployments mix frames the policy drove with frames a person commanded (interventions).
Given ``labelled`` frames (``vla_rl.training.sft.interventions``), samples start only on them and a
chunk is cut where its segment of labelled frames ends: the steps after it are masked like padding
(and repeat the segment's last action), so the policy's own actions never become targets.
``frame_repeats`` draws given frames more often (e.g. interventions among all frames).

Frames where a demonstration changes course can be drawn more often (``boundary_repeats``): the
first frames of each episode and of each segment after the gripper command flips (grasp, release).
There the instruction alone says where to go next; elsewhere the motion so far largely does, so
without the extra weight a policy can fit most frames while ignoring the instruction.

Minibatches are drawn without replacement from a seeded permutation per epoch (a private
``torch.Generator``); ``state_dict`` captures the permutation, the position in it and the generator,
so a resumed run draws exactly the batches the uninterrupted run would have drawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from vla_rl.data.episode import Episode, env_observation
from vla_rl.envs.base import Observation


@dataclass
class ChunkBatch:
    """A minibatch of B samples."""

    obs: Observation
    """Batched observation at the sampled steps (environment format)."""
    action_chunk: torch.Tensor
    """float32 [B, chunk_len, action_dim]: demonstrated actions from the sampled step on."""
    chunk_mask: torch.Tensor
    """bool [B, chunk_len]: False where the chunk runs past the episode end, or past the end of its
    run of labelled frames (padding)."""
    episode_index: torch.Tensor
    """int64 [B]: which episode each sample comes from."""
    step_index: torch.Tensor
    """int64 [B]: the step t within its episode."""


def chunk_indices(
    episode_length: int, step: int, chunk_len: int, labelled: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the episode's actions forming the chunk at ``step`` and the validity mask. With
    ``labelled`` (bool [T]), the chunk also ends where the run of labelled frames from ``step`` ends.

    >>> rows, mask = chunk_indices(5, 3, 4)
    >>> rows.tolist(), mask.tolist()
    ([3, 4, 4, 4], [True, True, False, False])
    >>> rows, mask = chunk_indices(6, 1, 4, np.array([0, 1, 1, 0, 1, 1], dtype=bool))
    >>> rows.tolist(), mask.tolist()
    ([1, 2, 2, 2], [True, True, False, False])
    """
    wanted = step + np.arange(chunk_len)
    rows, mask = np.minimum(wanted, episode_length - 1), wanted < episode_length
    if labelled is None:
        return rows, mask
    mask = mask & np.logical_and.accumulate(labelled[rows])
    if not mask[0]:
        raise ValueError(f"step {step} is not a labelled frame: no chunk starts there")
    return np.where(mask, rows, rows[mask][-1]), mask


def boundary_frames(actions: np.ndarray, gripper_index: int, frames: int) -> np.ndarray:
    """bool [T]: the first ``frames`` steps of the episode and of each segment that starts where
    the sign of the gripper command ``actions[:, gripper_index]`` flips.

    >>> gripper = np.array([[1.0], [1.0], [1.0], [-1.0], [-1.0], [-1.0]])
    >>> boundary_frames(gripper, -1, 2).astype(int).tolist()
    [1, 1, 0, 1, 1, 0]
    """
    signs = np.sign(actions[:, gripper_index])
    starts = np.concatenate([[0], np.flatnonzero(signs[1:] != signs[:-1]) + 1])
    marked = np.zeros(len(actions), dtype=bool)
    for start in starts:
        marked[start : start + frames] = True
    return marked


class ChunkSampler:
    """Seeded minibatches of (observation, action chunk, mask) over a list of episodes."""

    def __init__(
        self,
        episodes: Sequence[Episode],
        chunk_len: int,
        batch_size: int,
        seed: int = 0,
        obs_transform: Callable[[Observation], Observation] | None = None,
        boundary_repeats: int = 1,
        boundary_window: int = 4,
        gripper_index: int = -1,
        labelled: Sequence[np.ndarray] | None = None,
        frame_repeats: Sequence[np.ndarray] | None = None,
    ) -> None:
        """``obs_transform`` maps each collated observation to what the policy reads (e.g. adds
        ``"objects"``, a view of the recorded privileged state, as the simulator does).
        ``boundary_repeats`` > 1 lists each of the ``boundary_window`` first frames of an episode
        and of each gripper segment that many times per epoch (see ``boundary_frames``).
        ``labelled`` (bool [T] per episode; None: all) are the frames whose actions are targets:
        samples start only there and chunks end with their run (``chunk_indices``).
        ``frame_repeats`` (int [T] per episode; None: ones) multiplies how often each frame is listed."""
        if not episodes:
            raise ValueError("no demonstration episodes to sample from")
        if chunk_len <= 0 or batch_size <= 0:
            raise ValueError(f"chunk_len and batch_size must be positive (got {chunk_len}, {batch_size})")
        if boundary_repeats < 1 or boundary_window < 0:
            raise ValueError(
                f"boundary_repeats must be >= 1 and boundary_window >= 0 (got {boundary_repeats}, "
                f"{boundary_window})"
            )
        _check_consistent(episodes)
        self.episodes = list(episodes)
        self.chunk_len = chunk_len
        self.obs_transform = obs_transform
        lengths = np.array([len(episode) for episode in self.episodes], dtype=np.int64)
        episode_of_frame = np.repeat(np.arange(len(self.episodes)), lengths)
        step_of_frame = np.concatenate([np.arange(length) for length in lengths])
        repeats = np.ones(len(step_of_frame), dtype=np.int64)
        if boundary_repeats > 1 and boundary_window > 0:
            marked = np.concatenate(
                [boundary_frames(e.actions, gripper_index, boundary_window) for e in self.episodes]
            )
            repeats[marked] = boundary_repeats
        self.labelled = None if labelled is None else self._per_frame(labelled, bool, "labelled")
        if self.labelled is not None:
            repeats *= np.concatenate(self.labelled)
        if frame_repeats is not None:
            repeats *= np.concatenate(self._per_frame(frame_repeats, np.int64, "frame_repeats"))
        if not repeats.any():
            raise ValueError("no frame to sample from: every frame is unlabelled or repeated 0 times")
        self.sample_episode = np.repeat(episode_of_frame, repeats)
        self.sample_step = np.repeat(step_of_frame, repeats)
        self.batch_size = min(batch_size, self.num_samples)
        """Samples per batch; a dataset smaller than the requested size gives whole-dataset batches."""
        self.generator = torch.Generator().manual_seed(seed)
        self.epoch = 0
        self._order = torch.randperm(self.num_samples, generator=self.generator)
        self._cursor = 0

    def _per_frame(self, values: Sequence[np.ndarray], dtype: type, name: str) -> list[np.ndarray]:
        arrays = [np.asarray(v).astype(dtype).reshape(-1) for v in values]
        lengths = [len(a) for a in arrays]
        if lengths != [len(e) for e in self.episodes]:
            raise ValueError(f"{name} has {lengths} frames, the episodes {[len(e) for e in self.episodes]}")
        return arrays

    @property
    def num_samples(self) -> int:
        return len(self.sample_episode)

    @property
    def batches_per_epoch(self) -> int:
        """Full batches per pass over the data (a last partial batch is dropped)."""
        return self.num_samples // self.batch_size

    def next_batch(self) -> ChunkBatch:
        """The next minibatch; a new shuffled epoch starts when the current one has no full batch left."""
        if self._cursor + self.batch_size > self.num_samples:
            self.epoch += 1
            self._order = torch.randperm(self.num_samples, generator=self.generator)
            self._cursor = 0
        picked = self._order[self._cursor : self._cursor + self.batch_size].numpy()
        self._cursor += self.batch_size
        return self.collate(picked)

    def collate(self, sample_ids: np.ndarray | Sequence[int]) -> ChunkBatch:
        """The batch made of the given sample ids (rows of the (episode, step) table)."""
        sample_ids = np.asarray(sample_ids, dtype=np.int64)
        episode_ids = self.sample_episode[sample_ids]
        steps = self.sample_step[sample_ids]
        pairs = [(self.episodes[e], int(t)) for e, t in zip(episode_ids, steps, strict=True)]
        chunks, masks = [], []
        for (episode, step), index in zip(pairs, episode_ids, strict=True):
            labelled = None if self.labelled is None else self.labelled[index]
            rows, mask = chunk_indices(len(episode), step, self.chunk_len, labelled)
            chunks.append(episode.actions[rows])
            masks.append(mask)
        obs = observation_at(pairs)
        return ChunkBatch(
            obs=self.obs_transform(obs) if self.obs_transform is not None else obs,
            action_chunk=torch.from_numpy(np.stack(chunks).astype(np.float32)),
            chunk_mask=torch.from_numpy(np.stack(masks)),
            episode_index=torch.from_numpy(episode_ids.copy()),
            step_index=torch.from_numpy(steps.copy()),
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "cursor": self._cursor,
            "order": self._order.clone(),
            "generator": self.generator.get_state(),
            "num_samples": self.num_samples,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["num_samples"]) != self.num_samples:
            raise ValueError(
                f"the sampler state was saved for {state['num_samples']} samples, the data has "
                f"{self.num_samples}: resume with the same dataset and max_episodes"
            )
        self.epoch = int(state["epoch"])
        self._cursor = int(state["cursor"])
        self._order = state["order"].clone()
        self.generator.set_state(state["generator"])


def observation_at(pairs: Sequence[tuple[Episode, int]]) -> Observation:
    """Batched environment-format observation of ``(episode, step)`` pairs."""
    first = pairs[0][0]
    privileged = None
    if first.privileged is not None:
        privileged = np.stack([episode.privileged[t] for episode, t in pairs])  # type: ignore[index]
    obs: Observation = env_observation(
        {camera: np.stack([episode.images[camera][t] for episode, t in pairs]) for camera in first.images},
        np.stack([episode.proprio[t] for episode, t in pairs]),
        privileged,
    )
    obs["instruction"] = [episode.instruction for episode, _ in pairs]
    return obs


def _check_consistent(episodes: Sequence[Episode]) -> None:
    """Every episode must provide the same observation keys and widths (they are stacked)."""
    first = episodes[0]
    for index, episode in enumerate(episodes):
        if len(episode) == 0:
            raise ValueError(f"episode {index} has no steps")
        if sorted(episode.images) != sorted(first.images):
            raise ValueError(
                f"episode {index} has cameras {sorted(episode.images)}, episode 0 {sorted(first.images)}"
            )
        if (episode.privileged is None) != (first.privileged is None):
            raise ValueError(f"episode {index} and episode 0 disagree on recording 'privileged'")
        if episode.actions.shape[1:] != first.actions.shape[1:]:
            raise ValueError(
                f"episode {index} has actions of shape {episode.actions.shape[1:]}, episode 0 "
                f"{first.actions.shape[1:]}"
            )
        if len(episode.proprio) != len(episode):
            raise ValueError(
                f"episode {index}: {len(episode.proprio)} proprio rows for {len(episode)} actions"
            )
