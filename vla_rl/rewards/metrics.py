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
    fields = {name: (field,) for name, field in GOAL_DISTANCE_FIELDS.items()}
    return progress_along(_path_length(fields, "goal distance", task, privileged), episode)


def remaining_path_progress(task: str, privileged: np.ndarray, episode: np.ndarray) -> np.ndarray:
    """[N] in [0, 1]: ``1 - d_t / d_0`` with ``d`` the path still to travel (``REMAINING_PATH_FIELDS``)."""
    return progress_along(_path_length(REMAINING_PATH_FIELDS, "remaining path", task, privileged), episode)


def progress_along(distance: np.ndarray, episode: np.ndarray) -> np.ndarray:
    """``clip(1 - distance / distance at the episode's first frame, 0, 1)`` per frame."""
    _, first_rows, episode_of_row = np.unique(np.asarray(episode), return_index=True, return_inverse=True)
    initial = distance[first_rows][episode_of_row]
    return np.clip(1.0 - distance / np.maximum(initial, 1e-6), 0.0, 1.0)


def _path_length(
    fields_of_task: dict[str, tuple[str, ...]], what: str, task: str, privileged: np.ndarray
) -> np.ndarray:
    """The summed norms of the privileged fields ``fields_of_task[task]`` (``what`` they measure)."""
    from vla_rl.sims.mujoco.observations import split_fields
    from vla_rl.sims.tasks.registry import TASKS

    if task not in fields_of_task:
        raise ValueError(f"no {what} defined for task {task!r}; known: {sorted(fields_of_task)}")
    values = split_fields(privileged, TASKS[task].privileged_fields)
    return sum(np.linalg.norm(values[name], axis=-1) for name in fields_of_task[task])
