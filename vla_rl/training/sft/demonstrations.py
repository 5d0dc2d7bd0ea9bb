"""Demonstration episodes for SFT: the first K of a dataset, and their action statistics."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode


def take_episodes(episodes: Iterable[Episode], max_episodes: int = 0) -> list[Episode]:
    """The first ``max_episodes`` episodes (the demonstration budget); ``<= 0`` takes all."""
    chosen = episodes if max_episodes <= 0 else itertools.islice(episodes, max_episodes)
    return list(chosen)


def load_demonstrations(
    path: str | Path | None, max_episodes: int = 0, key: str = "data.path"
) -> list[Episode]:
    """Episodes of the LeRobot dataset (v2.x or v3.0) at ``path`` (read by ``open_dataset``); errors
    name the config ``key`` that gave the path."""
    if path is None or str(path) == "":
        raise ConfigError(f"config key '{key}': give the demonstration dataset folder ({key}=DIR)")
    if not Path(path).is_dir():
        raise ConfigError(f"config key '{key}': no dataset folder at {path}")
    from vla_rl.data.lerobot_format import open_dataset

    episodes = take_episodes(open_dataset(path).episodes(), max_episodes)
    if not episodes:
        raise ConfigError(f"config key '{key}': the dataset at {path} has no episodes")
    return episodes


def with_action_labels(episodes: list[Episode], action_key: str) -> list[Episode]:
    """Episodes whose ``actions`` are the per-frame column ``action_key``: ``action`` keeps what was
    executed; ``expert_action`` is the clean expert label that ``collect`` records next to noisy
    executed actions (the states come from the noise, the labels from the expert)."""
    if action_key == "action":
        return episodes
    relabelled = []
    for index, episode in enumerate(episodes):
        if action_key not in episode.extras:
            known = ", ".join(["action", *sorted(episode.extras)])
            raise ConfigError(
                f"config key 'data.action_key': episode {index} has no column {action_key!r} (has: {known})"
            )
        labels = np.asarray(episode.extras[action_key], dtype=np.float32)
        if labels.shape != episode.actions.shape:
            raise ConfigError(
                f"config key 'data.action_key': column {action_key!r} has shape {labels.shape}, the "
                f"actions {episode.actions.shape}"
            )
        relabelled.append(dataclasses.replace(episode, actions=labels))
    return relabelled


def action_quantiles(
    episodes: Iterable[Episode],
    low_quantile: float,
    high_quantile: float,
    labelled: Sequence[np.ndarray] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-dimension ``low_quantile`` and ``high_quantile`` of all demonstrated actions (float32 [A]);
    with ``labelled`` (bool [T] per episode), of the labelled frames' actions only."""
    per_episode = [np.asarray(episode.actions, dtype=np.float64) for episode in episodes]
    if labelled is not None:
        per_episode = [a[np.asarray(keep, bool)] for a, keep in zip(per_episode, labelled, strict=True)]
    actions = np.concatenate(per_episode)
    low, high = np.quantile(actions, [low_quantile, high_quantile], axis=0)
    return torch.as_tensor(low, dtype=torch.float32), torch.as_tensor(high, dtype=torch.float32)
