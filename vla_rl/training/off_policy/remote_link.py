"""What a learner shares with the server that its remote actors talk to: the shape of a transitions
message, an inbox of accepted transitions, and the actor weights it last published.

The server (``vla_rl.real_world.learner_server``) fills the inbox from its connection threads and
reads the weights; the learner (``remote_source.RemoteSource``) drains the inbox and publishes. Both
sides only meet here, so this layer never imports the network code.

A transitions message holds B rows, B a positive multiple of the learner's ``worlds`` (one batched
env step of an actor is ``worlds`` rows; several steps go step after step)::

    {"obs": {key: [B, *shape]}, "next_obs": {key: [B, *shape]},
     "action": float32 [B, action_dim], "reward": float32 [B],
     "terminated": bool [B], "truncated": bool [B], "intervention": bool [B]}

Observation entries are float32, camera images (``rgb_*`` keys) uint8 [B, H, W, 3], as the replay
buffer stores them (``obs_dtype``). ``next_obs`` is the observation after the action (where an
episode ended, its final one, never the reset one).
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from vla_rl.data.replay_buffer import IMAGE_PREFIX

FLAG_FIELDS = ("terminated", "truncated", "intervention")


def obs_dtype(key: str) -> np.dtype:
    """The dtype of observation ``key`` in a transitions message: uint8 for camera images, else
    float32."""
    return np.dtype(np.uint8 if key.startswith(IMAGE_PREFIX) else np.float32)


@dataclass(frozen=True)
class TransitionRows:
    """One accepted transitions message, checked (numpy arrays, B rows each)."""

    obs: dict[str, np.ndarray]
    action: np.ndarray
    reward: np.ndarray
    next_obs: dict[str, np.ndarray]
    terminated: np.ndarray
    truncated: np.ndarray
    intervention: np.ndarray

    def __len__(self) -> int:
        return len(self.reward)


@dataclass(frozen=True)
class TransitionSpec:
    """What the learner accepts: its observation keys and their row shapes, the action size, and the
    worlds of one env step (the replay buffer's ``num_envs``)."""

    obs_shapes: dict[str, tuple[int, ...]]
    """Observation key -> shape of one row (of ``obs_dtype(key)``)."""
    action_dim: int
    """Entries of one action (float32)."""
    worlds: int
    """Rows of one batched env step; a message holds a positive multiple of them."""

    @classmethod
    def of_space(
        cls, observation_space: gym.spaces.Dict, obs_keys: list[str], action_dim: int, worlds: int
    ) -> TransitionSpec:
        shapes = {key: tuple(int(d) for d in observation_space[key].shape) for key in obs_keys}
        return cls(shapes, action_dim, worlds)

    def check(self, message: Any) -> TransitionRows:
        """The message's rows, or ``ValueError`` naming the first thing wrong with it."""
        if not isinstance(message, dict):
            raise ValueError("'transitions' must be a map")
        expected = {"obs", "next_obs", "action", "reward", *FLAG_FIELDS}
        if set(message) != expected:
            raise ValueError(f"'transitions' has fields {sorted(message)}, expected {sorted(expected)}")
        reward = _array(message, "reward", np.float32, None)
        rows = len(reward)
        if rows == 0 or rows % self.worlds:
            raise ValueError(f"{rows} rows is not a positive multiple of the {self.worlds} worlds of a step")
        return TransitionRows(
            obs=self._observation(message, "obs", rows),
            action=_array(message, "action", np.float32, (rows, self.action_dim)),
            reward=reward,
            next_obs=self._observation(message, "next_obs", rows),
            **{name: _array(message, name, np.bool_, (rows,)) for name in FLAG_FIELDS},
        )

    def _observation(self, message: dict[str, Any], name: str, rows: int) -> dict[str, np.ndarray]:
        obs = message[name]
        if not isinstance(obs, dict) or set(obs) != set(self.obs_shapes):
            keys = sorted(obs) if isinstance(obs, dict) else type(obs).__name__
            raise ValueError(f"'{name}' has keys {keys}, expected {sorted(self.obs_shapes)}")
        return {
            key: _array(obs, key, obs_dtype(key), (rows, *shape), f"{name}.{key}")
            for key, shape in self.obs_shapes.items()
        }


def _array(
    fields: dict[str, Any],
    key: str,
    dtype: type | np.dtype,
    shape: tuple[int, ...] | None,
    name: str | None = None,
) -> np.ndarray:
    """``fields[key]`` checked to be a finite array of ``dtype`` and ``shape`` (None: any 1-d)."""
    name = name or key
    value = fields[key]
    if not isinstance(value, np.ndarray) or value.dtype != np.dtype(dtype):
        got = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
        raise ValueError(f"'{name}' must be a {np.dtype(dtype)} array, got {got}")
    if (value.ndim != 1) if shape is None else (value.shape != shape):
        raise ValueError(f"'{name}' has shape {value.shape}, expected {shape or '[rows]'}")
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise ValueError(f"'{name}' holds non-finite values")
    return value


@dataclass(frozen=True)
class InboxEntry:
    actor_id: str
    seq: int
    rows: TransitionRows


class TransitionInbox:
    """Accepted transitions waiting for the learner; thread-safe. Each actor numbers its messages;
    a message whose number is not above the last one taken from that actor is a resend and is
    dropped (``put`` returns False)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._entries: deque[InboxEntry] = deque()
        self._last_seq: dict[str, int] = {}

    def put(self, actor_id: str, seq: int, rows: TransitionRows) -> bool:
        with self._changed:
            if seq <= self._last_seq.get(actor_id, -1):
                return False
            self._last_seq[actor_id] = seq
            self._entries.append(InboxEntry(actor_id, seq, rows))
            self._changed.notify_all()
            return True

    def drain(self) -> list[InboxEntry]:
        """Everything accepted since the last drain, in arrival order."""
        with self._changed:
            entries = list(self._entries)
            self._entries.clear()
            return entries

    def wait(self, timeout_s: float) -> None:
        """Return once something is waiting, or after ``timeout_s``."""
        with self._changed:
            if not self._entries:
                self._changed.wait(timeout_s)

    def restore(self, last_seq: dict[str, int]) -> None:
        """After a resume: the last message taken from each actor is the checkpoint's (what came
        later was lost with the learner, and a resend of it is new again)."""
        with self._changed:
            self._entries.clear()
            self._last_seq = dict(last_seq)


@dataclass(frozen=True)
class Published:
    """Weights as published: a version (the learner's update count) and CPU tensors."""

    version: int
    state: dict[str, torch.Tensor]


class PublishedWeights:
    """The actor weights the learner last published; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: Published | None = None

    def publish(self, version: int, module: torch.nn.Module) -> None:
        state = {name: value.detach().cpu().clone() for name, value in module.state_dict().items()}
        with self._lock:
            self._latest = Published(version, state)

    def latest(self) -> Published | None:
        with self._lock:
            return self._latest


@dataclass
class LearnerLink:
    """The inbox and the weights of one learner, and the transitions it accepts."""

    spec: TransitionSpec
    inbox: TransitionInbox = field(default_factory=TransitionInbox)
    weights: PublishedWeights = field(default_factory=PublishedWeights)
