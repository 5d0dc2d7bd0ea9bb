"""Which frames of recorded deployments SFT learns from: HG-DAgger's interventions.

``vla-rl deploy`` records every control step with an ``intervention`` flag: True where a person (or,
in a rehearsal, the scripted expert) commanded the robot instead of the policy, and the ``action``
of such a frame is that command in the policy's units. Two ways to learn from it
(``SFTDataConfig``):

* ``data.intervention_only``: the intervention frames are the only labels (HG-DAgger). Samples start
  on them, and a chunk that runs past the end of its intervention segment (into frames the policy
  drove) is cut there: those steps are masked from the loss like the padding past an episode's end.
* ``data.intervention_repeats``: every frame is a label, and each intervention frame is drawn that
  many times per epoch (the corrections weighted against the policy's own frames).

HG-DAgger trains on the aggregate: the original demonstrations (``data.demonstrations``) plus every
takeover so far. A demonstration was driven by the expert from start to end, so all its frames are
labels under either option, each drawn once; with both options the takeover frames are the recording's
only labels and each is drawn ``intervention_repeats`` times against the demonstrations' frames.

Whatever the options, no sample starts on a frame whose recorded images lag its state (the
``images.unsynced`` column: a camera had no frame of that control period): its observation is not the
one the action was chosen from. Its action still counts inside chunks that start earlier.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.training.sft.config import SFTDataConfig

INTERVENTION_COLUMN = "intervention"
"""The per-frame flag ``vla-rl deploy`` records (``vla_rl.real_world.recording.INTERVENTION_KEY``)."""
UNSYNCED_COLUMN = "images.unsynced"
"""The per-frame flag of images older than the state (``vla_rl.real_world.recording.IMAGES_UNSYNCED_KEY``)."""


@dataclass
class FrameSelection:
    """What the chunk sampler is told about the frames (see ``ChunkSampler``)."""

    labelled: list[np.ndarray] | None = None
    """bool [T] per episode: frames whose action is a label; None: every frame."""
    frame_repeats: list[np.ndarray] | None = None
    """int [T] per episode: times each frame is drawn per epoch; None: once."""


def intervention_flags(episodes: Sequence[Episode], key: str) -> list[np.ndarray]:
    """The ``intervention`` column of every episode (bool [T]); a ``ConfigError`` naming ``key`` when
    an episode has none (not a deployment recording) or no episode has an intervention frame."""
    flags = []
    for index, episode in enumerate(episodes):
        if INTERVENTION_COLUMN not in episode.extras:
            columns = ", ".join(sorted(episode.extras)) or "none"
            raise ConfigError(
                f"config key '{key}': episode {index} has no {INTERVENTION_COLUMN!r} column (extra "
                f"columns: {columns}); record the data with `vla-rl deploy recording.enabled=true`"
            )
        flag = np.asarray(episode.extras[INTERVENTION_COLUMN]).astype(bool).reshape(-1)
        if len(flag) != len(episode):
            raise ConfigError(
                f"config key '{key}': episode {index} has {len(flag)} intervention flags for "
                f"{len(episode)} frames"
            )
        flags.append(flag)
    if not any(flag.any() for flag in flags):
        raise ConfigError(f"config key '{key}': the {len(flags)} episodes have no intervention frame")
    return flags


def select_frames(
    episodes: Sequence[Episode], data: SFTDataConfig, demonstrations: Sequence[Episode] = ()
) -> FrameSelection:
    """The ``FrameSelection`` that ``data.intervention_only`` and ``data.intervention_repeats`` ask for,
    over ``episodes`` (recorded deployments) followed by ``demonstrations`` (every frame a label),
    with no sample start on a frame of ``episodes`` whose images lag its state."""
    ones = [np.ones(len(d), np.int64) for d in demonstrations]
    labelled = repeats = None
    if data.intervention_only or data.intervention_repeats > 1:
        key = "data.intervention_only" if data.intervention_only else "data.intervention_repeats"
        flags = intervention_flags(episodes, key)
        if data.intervention_only:
            labelled = flags + [one.astype(bool) for one in ones]
        if data.intervention_repeats > 1:
            repeats = [np.where(f, data.intervention_repeats, 1) for f in flags] + ones
    lagging = unsynced_flags(episodes)
    if not demonstrations and all(flag.all() for flag in lagging):
        raise ConfigError(
            f"config key 'data.path': every frame of the {len(episodes)} recorded episodes has images "
            f"older than its state ({UNSYNCED_COLUMN!r}); no sample can start on one"
        )
    if any(flag.any() for flag in lagging):
        starts = [(~flag).astype(np.int64) for flag in lagging] + ones
        repeats = starts if repeats is None else [r * s for r, s in zip(repeats, starts, strict=True)]
    return FrameSelection(labelled, repeats)


def unsynced_flags(episodes: Sequence[Episode]) -> list[np.ndarray]:
    """bool [T] per episode: its ``images.unsynced`` column, all False where it has none."""
    return [
        np.asarray(e.extras[UNSYNCED_COLUMN], bool).reshape(-1)
        if UNSYNCED_COLUMN in e.extras
        else np.zeros(len(e), bool)
        for e in episodes
    ]
