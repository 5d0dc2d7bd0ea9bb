"""How good a reward model is on held-out episodes: success detection and progress ranking."""

from __future__ import annotations

import numpy as np

GOAL_DISTANCE_FIELDS = {"reach": "tcp_to_target", "push": "cube_to_target_xy"}
"""Privileged field whose norm is the distance still to cover, per task with a distance goal."""

REMAINING_PATH_FIELDS = {"reach": ("tcp_to_target",), "push": ("tcp_to_cube", "cube_to_target_xy")}
"""Privileged fields whose norms add up to the path still to travel, per task: for ``push`` the
gripper to the cube, then the cube to the target. Progress labels taken from the recorded state
(``vla-rl reward-train progress_labels=task_state``) measure this path, so a frame where the gripper
waits over the target while the cube sits elsewhere is labelled as far from done."""


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` separating ``labels`` 1 from 0 (ties count half).

    Equals the Mann-Whitney U statistic of the positives over ``n_pos * n_neg``: the chance that
    a random positive frame scores above a random negative one.
    """
    stats = _scipy_stats()
    labels = np.asarray(labels).astype(bool)
    positives, negatives = np.asarray(scores)[labels], np.asarray(scores)[~labels]
    if len(positives) == 0 or len(negatives) == 0:
        raise ValueError("AUROC needs both positive and negative frames")
    u_statistic = stats.mannwhitneyu(positives, negatives, alternative="two-sided").statistic
    return float(u_statistic / (len(positives) * len(negatives)))


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation of ``a`` and ``b`` (ties get their mean rank)."""
    return float(_scipy_stats().spearmanr(a, b).statistic)


def _scipy_stats():  # noqa: ANN202 - the scipy.stats module
    try:
        from scipy import stats
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError(
            "reward-model quality measures need scipy: pip install -e '.[rewards]'"
        ) from error
    return stats


def true_progress(task: str, privileged: np.ndarray, episode: np.ndarray) -> np.ndarray:
    """[N] in [0, 1]: ``1 - d_t / d_0`` per frame, ``d`` the distance to the goal and ``d_0`` that of
    the frame's episode's first frame (frames of one episode in order)."""
    if task not in GOAL_DISTANCE_FIELDS:
        raise ValueError(f"no goal distance defined for task {task!r}; known: {sorted(GOAL_DISTANCE_FIELDS)}")
    return progress_along(_path_length(task, privileged, (GOAL_DISTANCE_FIELDS[task],)), episode)


def remaining_path_progress(task: str, privileged: np.ndarray, episode: np.ndarray) -> np.ndarray:
    """[N] in [0, 1]: ``1 - d_t / d_0`` with ``d`` the path still to travel (``REMAINING_PATH_FIELDS``)."""
    if task not in REMAINING_PATH_FIELDS:
        known = sorted(REMAINING_PATH_FIELDS)
        raise ValueError(f"no remaining path defined for task {task!r}; known: {known}")
    return progress_along(_path_length(task, privileged, REMAINING_PATH_FIELDS[task]), episode)


def progress_along(distance: np.ndarray, episode: np.ndarray) -> np.ndarray:
    """``clip(1 - distance / distance at the episode's first frame, 0, 1)`` per frame."""
    episode = np.asarray(episode)
    _, first_rows = np.unique(episode, return_index=True)
    start = dict(zip(episode[first_rows], distance[first_rows], strict=True))
    initial = np.array([start[e] for e in episode])
    return np.clip(1.0 - distance / np.maximum(initial, 1e-6), 0.0, 1.0)


def _path_length(task: str, privileged: np.ndarray, fields: tuple[str, ...]) -> np.ndarray:
    from vla_rl.sims.mujoco.observations import split_fields
    from vla_rl.sims.tasks.registry import TASKS

    values = split_fields(privileged, TASKS[task].privileged_fields)
    return sum(np.linalg.norm(values[name], axis=-1) for name in fields)
