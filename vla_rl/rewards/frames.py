"""Labelled frames for reward models, cut from recorded episodes (demonstrations and failures).

A dataset stores the observation *before* each action and the success flag *after* it, so frame
``t`` shows the state that step ``t - 1`` produced: its success label is ``success_per_step[t - 1]``
(the first frame is labelled not done). Progress is labelled on episodes that succeed: frame ``t``
of an episode first successful at frame ``t_s`` has progress ``min(t / t_s, 1)``; failed episodes
give success labels only (how far they got is not known without the simulator's state).
Where the episodes recorded the simulator's state, ``with_state_progress`` labels the progress of
every frame, failed episodes included, by the path still to travel.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from vla_rl.data.episode import Episode


@dataclass
class LabelledFrames:
    """Frames of many episodes with their labels, all with N rows."""

    frames: torch.Tensor
    """uint8 [N, V, H, W, 3]: the cameras of each frame, in the order asked for."""
    instructions: list[str]
    """The episode instruction of each frame."""
    success: torch.Tensor
    """float32 [N]: 1 where the frame shows the task done."""
    progress: torch.Tensor
    """float32 [N] in [0, 1]: progress label (valid where ``progress_mask``)."""
    progress_mask: torch.Tensor
    """bool [N]: the frame belongs to a successful episode, so its progress is labelled."""
    episode: torch.Tensor
    """int64 [N]: index of the frame's episode (in the order the episodes were given)."""
    step: torch.Tensor
    """int64 [N]: index of the frame within its episode."""
    privileged: np.ndarray | None
    """float32 [N, K]: the simulator's privileged state at the frame, when every episode has it."""

    def __len__(self) -> int:
        return len(self.instructions)

    def view_frames(self, rows: torch.Tensor | slice) -> torch.Tensor:
        """Frames of ``rows`` shaped for a model: [B, H, W, 3] with one camera, else [B, V, H, W, 3]."""
        frames = self.frames[rows]
        return frames[:, 0] if frames.shape[1] == 1 else frames


def frame_labels(episode: Episode) -> tuple[np.ndarray, np.ndarray, bool]:
    """(success per frame, progress per frame, progress labelled) of one episode."""
    if episode.success_per_step is None:
        raise ValueError("an episode without per-step success flags cannot label reward-model frames")
    length = len(episode)
    success = np.zeros(length, np.float32)
    success[1:] = episode.success_per_step[:-1]
    done_frames = np.flatnonzero(success)
    if len(done_frames) == 0:
        return success, np.zeros(length, np.float32), False
    first = max(int(done_frames[0]), 1)
    progress = np.minimum(np.arange(length, dtype=np.float32) / first, 1.0)
    return success, progress, True


def labelled_frames(episodes: Iterable[Episode], cameras: Sequence[str]) -> LabelledFrames:
    """Every frame of ``episodes`` with the cameras ``cameras`` stacked, labelled by ``frame_labels``."""
    frames, instructions, success, progress, mask, episode_ids, steps, privileged = ([] for _ in range(8))
    for index, episode in enumerate(episodes):
        missing = [camera for camera in cameras if camera not in episode.images]
        if missing:
            raise ValueError(
                f"episode {index} has no frames of camera(s) {missing} (it has {sorted(episode.images)})"
            )
        length = len(episode)
        frames.append(np.stack([episode.images[camera] for camera in cameras], axis=1))
        instructions += [episode.instruction] * length
        labels = frame_labels(episode)
        success.append(labels[0])
        progress.append(labels[1])
        mask.append(np.full(length, labels[2]))
        episode_ids.append(np.full(length, index))
        steps.append(np.arange(length))
        privileged.append(episode.privileged)
    if not frames:
        raise ValueError("no episodes to take frames from")
    has_privileged = all(p is not None for p in privileged)
    return LabelledFrames(
        frames=torch.from_numpy(np.concatenate(frames)),
        instructions=instructions,
        success=torch.from_numpy(np.concatenate(success)),
        progress=torch.from_numpy(np.concatenate(progress)),
        progress_mask=torch.from_numpy(np.concatenate(mask)),
        episode=torch.from_numpy(np.concatenate(episode_ids)).long(),
        step=torch.from_numpy(np.concatenate(steps)).long(),
        privileged=np.concatenate(privileged).astype(np.float32) if has_privileged else None,
    )


def with_state_progress(frames: LabelledFrames, task: str) -> LabelledFrames:
    """``frames`` with every frame's progress labelled from the recorded privileged state:
    ``1 - d_t / d_0``, ``d`` the path still to travel (``REMAINING_PATH_FIELDS``). Failed episodes
    are labelled too, so the model learns how far they got rather than only that they failed."""
    from vla_rl.rewards.metrics import remaining_path_progress

    if frames.privileged is None:
        raise ValueError(
            "progress labels from the task state need episodes recorded with their privileged state"
        )
    progress = remaining_path_progress(task, frames.privileged, frames.episode.numpy())
    return replace(
        frames,
        progress=torch.from_numpy(progress.astype(np.float32)),
        progress_mask=torch.ones(len(frames), dtype=torch.bool),
    )
