"""Frame labels cut from recorded episodes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vla_rl.data.episode import Episode
from vla_rl.rewards.frames import frame_labels, labelled_frames, with_state_progress


def episode(success_per_step: list[bool], cameras: tuple[str, ...] = ("front",)) -> Episode:
    length = len(success_per_step)
    images = {camera: np.full((length, 4, 4, 3), i, np.uint8) for i, camera in enumerate(cameras)}
    return Episode(
        images=images,
        proprio=np.zeros((length, 2), np.float32),
        actions=np.zeros((length, 4), np.float32),
        instruction="push the cube onto the target",
        success=bool(success_per_step[-1]),
        success_per_step=np.asarray(success_per_step),
        privileged=np.arange(length, dtype=np.float32)[:, None],
    )


def test_success_labels_follow_the_state_each_frame_shows() -> None:
    # Frame t shows the state after action t - 1: the flags shift by one, the first frame is not done.
    success, progress, labelled = frame_labels(episode([False, False, True, True, False]))
    np.testing.assert_array_equal(success, [0, 0, 0, 1, 1])
    # First done frame is 3, so progress is t / 3, capped at 1.
    np.testing.assert_allclose(progress, [0, 1 / 3, 2 / 3, 1, 1])
    assert labelled


def test_failed_episodes_label_success_only() -> None:
    success, _, labelled = frame_labels(episode([False, False, False]))
    np.testing.assert_array_equal(success, [0, 0, 0])
    assert not labelled


def test_labelled_frames_stack_cameras_and_index_episodes() -> None:
    frames = labelled_frames(
        [episode([False, True, True], ("front", "wrist")), episode([False, True], ("front", "wrist"))],
        ["wrist", "front"],
    )
    assert frames.frames.shape == (5, 2, 4, 4, 3)
    assert frames.frames[0, 0, 0, 0, 0] == 1 and frames.frames[0, 1, 0, 0, 0] == 0  # wrist first
    torch.testing.assert_close(frames.episode, torch.tensor([0, 0, 0, 1, 1]))
    torch.testing.assert_close(frames.step, torch.tensor([0, 1, 2, 0, 1]))
    torch.testing.assert_close(frames.success, torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0]))
    # The second episode succeeds after its last action, a state no frame shows: no progress label.
    torch.testing.assert_close(frames.progress_mask, torch.tensor([True, True, True, False, False]))
    assert frames.privileged.shape == (5, 1)
    assert frames.view_frames(slice(0, 2)).shape == (2, 2, 4, 4, 3)


def test_missing_camera_and_missing_flags_are_errors() -> None:
    with pytest.raises(ValueError, match=r"camera\(s\) \['wrist'\]"):
        labelled_frames([episode([False, True])], ["wrist"])
    bare = episode([False, True])
    bare.success_per_step = None
    with pytest.raises(ValueError, match="per-step success"):
        frame_labels(bare)


def test_state_progress_labels_every_frame_failures_included() -> None:
    # reach's privileged state: target_pos (3), tcp_to_target (3); the gripper starts 0.4 m away.
    def reach_episode(distances_m: list[float], success_per_step: list[bool]) -> Episode:
        ep = episode(success_per_step)
        ep.privileged = np.array([[0, 0, 0, d, 0, 0] for d in distances_m], np.float32)
        return ep

    frames = labelled_frames(
        [reach_episode([0.4, 0.2, 0.0], [False, True, True]), reach_episode([0.4, 0.3], [False, False])],
        ["front"],
    )
    relabelled = with_state_progress(frames, "reach")
    torch.testing.assert_close(relabelled.progress, torch.tensor([0.0, 0.5, 1.0, 0.0, 0.25]))
    assert bool(relabelled.progress_mask.all())  # the failed episode is labelled too
    torch.testing.assert_close(relabelled.success, frames.success)  # success labels unchanged
    frames.privileged = None
    with pytest.raises(ValueError, match="privileged state"):
        with_state_progress(frames, "reach")
