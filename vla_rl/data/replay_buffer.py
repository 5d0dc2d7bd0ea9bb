"""The replay buffer of off-policy learners (SAC, RLPD): a ring of transitions whose observations are
stored once.

Layout. Two rings, allocated on ``device`` at the first write (shapes and keys come from that write):

* the **frame store** ``frames``: per observation key, ``[frame_capacity, ...]``; ``rgb_*`` images as
  uint8, every other tensor entry as float32; entries that are not tensors (``instruction``) are not
  kept. Frames are numbered in the order they are written: frame ``f`` lives in row
  ``f % frame_capacity`` and is gone once ``frame_capacity`` newer frames have been written.
* the **transition ring** ``transitions``: per field, ``[capacity, ...]``: ``obs_frame`` and
  ``next_frame`` (int64 frame numbers), ``action`` (float32), ``reward`` (float32), ``terminated``,
  ``truncated`` and ``intervention`` (bool). Transition ``k`` (numbered like frames) lives in slot
  ``k % capacity``.

Sharing. ``add`` writes every world's ``next_obs`` as a new frame and points each transition at it.
A world's ``obs`` is written only where it differs from that world's previous ``next_obs`` frame: at
its first step, after an autoreset (the previous ``next_obs`` was the episode's final observation,
``obs`` is the reset one) or after a reset outside ``step``. Elsewhere the transition points at the
frame already there, so a long episode costs one frame per transition instead of two, plus one for
its first observation. Sharing compares the frames exactly, so it can never pair a transition with
the wrong observation. ``share_frames=False`` writes both frames of every transition (for
comparison). ``add_trajectory`` writes one world's recorded trajectory at once, each frame shared by
the transition that ends on it and the one that starts from it (``replay_episodes`` turns recorded
episodes into trajectories).

Validity. A transition is whole while both its frames are still stored (frame number at least
``frames_written - frame_capacity``). The default ``frame_capacity``, ``capacity + 2 * num_envs``
(``2 * (capacity + num_envs)`` without sharing), keeps every frame of the last ``capacity``
transitions while no episode ends; each episode start writes one extra frame, so about
``capacity / episode_length`` of the oldest transitions lose their first frame shortly before their
slots are reused. ``len`` counts whole transitions; ``sample`` draws slots uniformly and redraws the
broken ones, which stays uniform over the whole transitions.

With a batched env (``next_obs`` is the observation before any autoreset)::

    obs, _ = env.reset(seed=0)
    result = env.step(action)
    buffer.add(obs, action, result.reward, result.terminated, result.truncated, result.info["final_obs"])
    obs = result.obs
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from vla_rl.data.replay_snapshot import SETTINGS, check_state, load_state, save_state
from vla_rl.envs.base import Observation

IMAGE_PREFIX = "rgb_"
"""Observation keys that start with this are camera images, stored as uint8."""
TRANSITION_FIELDS = ("obs_frame", "next_frame", "action", "reward", "terminated", "truncated", "intervention")
"""The per-transition fields of ``ReplayBuffer.transitions``."""


@dataclass
class TransitionBatch:
    """Transitions gathered from a ``ReplayBuffer``, B rows each."""

    obs: dict[str, torch.Tensor]
    """Observation key -> [B, ...] (images uint8, the rest float32) before the action."""
    action: torch.Tensor
    """float32 [B, ...] action taken."""
    reward: torch.Tensor
    """float32 [B] reward after the action."""
    next_obs: dict[str, torch.Tensor]
    """Observation after the action (the episode's final one where it ended, never a reset one)."""
    terminated: torch.Tensor
    """bool [B]: the episode reached a terminal state; the bootstrap mask (``done``)."""
    truncated: torch.Tensor
    """bool [B]: the episode hit its time limit (bootstrapped from ``next_obs``)."""
    intervention: torch.Tensor
    """bool [B]: a person or expert chose this action instead of the policy."""

    def __len__(self) -> int:
        return len(self.reward)


class ReplayBuffer:
    """Up to ``capacity`` transitions of ``num_envs`` worlds, sampled uniformly (layout: module doc)."""

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        device: str | torch.device = "cpu",
        frame_capacity: int | None = None,
        share_frames: bool = True,
        obs_keys: Sequence[str] | None = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        if capacity < num_envs:
            raise ValueError(f"capacity {capacity} is less than one step of {num_envs} worlds")
        if frame_capacity is None:
            frame_capacity = capacity + 2 * num_envs if share_frames else 2 * (capacity + num_envs)
        if frame_capacity < 2 * num_envs:
            raise ValueError(
                f"frame_capacity {frame_capacity} is less than the 2 * {num_envs} frames of a step"
            )
        self.capacity = capacity
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.frame_capacity = frame_capacity
        self.share_frames = share_frames
        self.obs_keys = None if obs_keys is None else list(obs_keys)
        """The observation keys stored (each observation must have them; others are dropped); None:
        every tensor entry."""
        self.frames: dict[str, torch.Tensor] = {}
        """Observation key -> [frame_capacity, ...] (empty until the first write)."""
        self.transitions: dict[str, torch.Tensor] = {}
        """``TRANSITION_FIELDS`` -> [capacity, ...] (empty until the first write)."""
        self.frames_written = 0
        """Frames written since creation; the next one gets this number."""
        self.transitions_written = 0
        """Transitions written since creation; the next one gets this number."""
        self.last_frame = torch.full((num_envs,), -1, dtype=torch.int64, device=self.device)
        """Per world, the frame number of its last ``next_obs`` (-1 before its first ``add``)."""
        self._whole_count: int | None = None

    # ----- writing ---------------------------------------------------------------------------------

    def add(
        self,
        obs: Observation,
        action: torch.Tensor,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        next_obs: Observation,
        intervention: torch.Tensor | None = None,
    ) -> None:
        """Store one step of every world: ``obs`` before ``action`` and ``next_obs`` after it (for a
        world whose episode ended, its final observation, not the reset one). Fields are [N] or
        [N, ...]; ``intervention`` (bool [N]) defaults to all False."""
        n = self.num_envs
        obs_frames = self._stored_frames(obs, n, "obs")
        next_frames = self._stored_frames(next_obs, n, "next_obs")
        _check_like(next_frames, obs_frames, "next_obs", "obs")
        if intervention is None:
            intervention = torch.zeros(n, dtype=torch.bool)
        fields = self._transition_fields(n, action, reward, terminated, truncated, intervention)
        self._prepare(obs_frames, fields["action"].shape[1:])
        shared = self._shared_with_last_frame(obs_frames)
        obs_numbers = self.last_frame.clone()
        new_rows = (~shared).nonzero().squeeze(1)
        if len(new_rows):
            obs_numbers[new_rows] = self._write_frames({k: v[new_rows] for k, v in obs_frames.items()})
        next_numbers = self._write_frames(next_frames)
        self._write_transitions(obs_frame=obs_numbers, next_frame=next_numbers, **fields)
        self.last_frame = next_numbers

    def add_trajectory(
        self,
        frames: Observation,
        action: torch.Tensor,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        intervention: torch.Tensor,
    ) -> None:
        """Store one world's trajectory: its ``T`` observations ``frames`` (key -> [T, ...], kept as
        ``add`` keeps observations) and its first ``C <= T`` transitions (``action`` [C, ...], the
        rest [C]). Transition ``k`` goes from frame ``k`` to frame ``min(k + 1, T - 1)``: with
        ``C == T`` the last one points at its own frame, which is right only for a terminal step (it
        is never bootstrapped). Recorded episodes come in through ``replay_episodes.add_episode``."""
        length = len(next(iter(frames.values()), ()))
        count = len(reward)
        if not 0 < count <= length:
            raise ValueError(f"a trajectory of {length} frames cannot hold {count} transitions")
        if length > self.frame_capacity or count > self.capacity:
            raise ValueError(
                f"an episode of {length} steps does not fit {self.capacity} transitions / "
                f"{self.frame_capacity} frames"
            )
        stored = self._stored_frames(frames, length, "episode")
        fields = self._transition_fields(count, action, reward, terminated, truncated, intervention)
        self._prepare(stored, fields["action"].shape[1:])
        numbers = self._write_frames(stored)
        following = (torch.arange(count, device=self.device) + 1).clamp(max=length - 1)
        self._write_transitions(obs_frame=numbers[:count], next_frame=numbers[following], **fields)

    def _transition_fields(
        self,
        rows: int,
        action: torch.Tensor,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        intervention: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """The per-transition fields but the frame numbers, checked to have ``rows`` rows, as stored."""
        return {
            "action": self._rows(action, rows, "action", torch.float32, vectors=True),
            "reward": self._rows(reward, rows, "reward", torch.float32),
            "terminated": self._rows(terminated, rows, "terminated", torch.bool),
            "truncated": self._rows(truncated, rows, "truncated", torch.bool),
            "intervention": self._rows(intervention, rows, "intervention", torch.bool),
        }

    def _prepare(self, frames: dict[str, torch.Tensor], action_shape: torch.Size) -> None:
        """Allocate the rings on the first write; later writes must match their keys and shapes."""
        if not self.frames:
            self._allocate(frames, action_shape)
            return
        _check_like(frames, self.frames, "observation", "buffer")
        if action_shape != self.transitions["action"].shape[1:]:
            raise ValueError(
                f"action has rows of shape {tuple(action_shape)}, the buffer "
                f"{tuple(self.transitions['action'].shape[1:])}"
            )

    def _allocate(self, frames: dict[str, torch.Tensor], action_shape: torch.Size) -> None:
        def zeros(rows: int, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros((rows, *shape), dtype=dtype, device=self.device)

        self.frames = {key: zeros(self.frame_capacity, v.shape[1:], v.dtype) for key, v in frames.items()}
        c = self.capacity
        self.transitions = {
            "obs_frame": zeros(c, (), torch.int64),
            "next_frame": zeros(c, (), torch.int64),
            "action": zeros(c, action_shape, torch.float32),
            "reward": zeros(c, (), torch.float32),
            "terminated": zeros(c, (), torch.bool),
            "truncated": zeros(c, (), torch.bool),
            "intervention": zeros(c, (), torch.bool),
        }

    def _shared_with_last_frame(self, obs_frames: dict[str, torch.Tensor]) -> torch.Tensor:
        """bool [N]: worlds whose ``obs`` equals their last ``next_obs`` frame, which survives this step
        (a step writes at most 2 N frames)."""
        shared = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        if not self.share_frames:
            return shared
        oldest_kept = max(0, self.frames_written + 2 * self.num_envs - self.frame_capacity)
        candidates = (self.last_frame >= oldest_kept).nonzero().squeeze(1)
        if len(candidates) == 0:
            return shared
        rows = self.last_frame[candidates] % self.frame_capacity
        equal = torch.ones(len(candidates), dtype=torch.bool, device=self.device)
        for key, value in obs_frames.items():
            equal &= _rows_equal(self.frames[key][rows], value[candidates])
        shared[candidates] = equal
        return shared

    def _write_frames(self, frames: dict[str, torch.Tensor]) -> torch.Tensor:
        """Write the next frames (at most ``frame_capacity``); returns their numbers (int64 [M])."""
        count = len(next(iter(frames.values())))
        numbers = torch.arange(self.frames_written, self.frames_written + count, device=self.device)
        rows = numbers % self.frame_capacity
        for key, value in frames.items():
            self.frames[key][rows] = value
        self.frames_written += count
        self._whole_count = None
        return numbers

    def _write_transitions(self, **fields: torch.Tensor) -> None:
        count = len(fields["obs_frame"])
        slots = torch.arange(self.transitions_written, self.transitions_written + count, device=self.device)
        slots %= self.capacity
        for name, value in fields.items():
            self.transitions[name][slots] = value
        self.transitions_written += count
        self._whole_count = None

    def _stored_frames(self, obs: Observation, rows: int, name: str) -> dict[str, torch.Tensor]:
        """The tensor entries of ``obs`` as stored: images uint8 (as given), the rest float32."""
        frames: dict[str, torch.Tensor] = {}
        for key, value in self._selected(obs, name).items():
            if not isinstance(value, torch.Tensor):
                continue
            if value.ndim == 0 or len(value) != rows:
                raise ValueError(f"{name}[{key!r}] has shape {tuple(value.shape)}, expected [{rows}, ...]")
            if key.startswith(IMAGE_PREFIX):
                if value.dtype != torch.uint8:
                    raise ValueError(f"{name}[{key!r}] is {value.dtype}; images are stored as uint8")
                frames[key] = value.to(self.device)
            else:
                frames[key] = value.to(device=self.device, dtype=torch.float32)
        if not frames:
            raise ValueError(f"{name} has no tensor entries")
        return frames

    def _selected(self, obs: Observation, name: str) -> Observation:
        """The entries of ``obs`` the buffer stores: ``obs_keys`` (each must be there), or all."""
        if self.obs_keys is None:
            return obs
        missing = [key for key in self.obs_keys if key not in obs]
        if missing:
            raise ValueError(f"{name} lacks the stored observation keys {missing} (it has {sorted(obs)})")
        return {key: obs[key] for key in self.obs_keys}

    def _rows(
        self, value: torch.Tensor, rows: int, name: str, dtype: torch.dtype, vectors: bool = False
    ) -> torch.Tensor:
        """``value`` checked to be [rows] (or [rows, ...] with ``vectors``), on the buffer's device as
        ``dtype``."""
        value = torch.as_tensor(value)
        ok = value.ndim >= 2 and len(value) == rows if vectors else tuple(value.shape) == (rows,)
        if not ok:
            expected = f"[{rows}, ...]" if vectors else f"[{rows}]"
            raise ValueError(f"{name} has shape {tuple(value.shape)}, expected {expected}")
        return value.to(device=self.device, dtype=dtype)

    # ----- reading ---------------------------------------------------------------------------------

    @property
    def num_stored(self) -> int:
        """Slots written so far (whole or not): ``min(transitions_written, capacity)``."""
        return min(self.transitions_written, self.capacity)

    def _whole(self, slots: torch.Tensor | slice) -> torch.Tensor:
        """bool per slot: both frames of its transition are still stored."""
        oldest_kept = self.frames_written - self.frame_capacity
        obs_frame = self.transitions["obs_frame"][slots]
        next_frame = self.transitions["next_frame"][slots]
        return (obs_frame >= oldest_kept) & (next_frame >= oldest_kept)

    def valid_slots(self) -> torch.Tensor:
        """int64 [M]: the slots that hold whole transitions, ascending."""
        if self.num_stored == 0:
            return torch.zeros(0, dtype=torch.int64, device=self.device)
        return self._whole(slice(0, self.num_stored)).nonzero().squeeze(1)

    def __len__(self) -> int:
        """Whole transitions held (what ``sample`` draws from); one pass over the slots after a write."""
        if self._whole_count is None:
            whole = int(self._whole(slice(0, self.num_stored)).sum()) if self.num_stored else 0
            self._whole_count = whole
        return self._whole_count

    def sample(
        self, batch_size: int, generator: torch.Generator, device: str | torch.device | None = None
    ) -> TransitionBatch:
        """``batch_size`` transitions drawn uniformly (with replacement) from the whole ones, with
        ``generator`` (on any device), returned on ``device`` (default: the buffer's)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if batch_size > len(self):
            raise ValueError(f"cannot sample {batch_size} transitions from a buffer holding {len(self)}")
        draw_device = generator.device
        slots = torch.randint(self.num_stored, (batch_size,), generator=generator, device=draw_device)
        broken = ~self._whole(slots.to(self.device)).to(draw_device)
        while broken.any():
            redraw = torch.randint(
                self.num_stored, (int(broken.sum()),), generator=generator, device=draw_device
            )
            slots[broken] = redraw
            broken = ~self._whole(slots.to(self.device)).to(draw_device)
        return self.gather(slots, device)

    def gather(self, slots: torch.Tensor, device: str | torch.device | None = None) -> TransitionBatch:
        """The transitions in ``slots`` (int64 [B], e.g. from ``valid_slots``), on ``device``."""
        device = self.device if device is None else torch.device(device)
        slots = slots.to(self.device)
        t = {name: value[slots] for name, value in self.transitions.items()}

        def frames_at(numbers: torch.Tensor) -> dict[str, torch.Tensor]:
            rows = numbers % self.frame_capacity
            return {key: value[rows].to(device) for key, value in self.frames.items()}

        return TransitionBatch(
            obs=frames_at(t["obs_frame"]),
            action=t["action"].to(device),
            reward=t["reward"].to(device),
            next_obs=frames_at(t["next_frame"]),
            terminated=t["terminated"].to(device),
            truncated=t["truncated"].to(device),
            intervention=t["intervention"].to(device),
        )

    @property
    def nbytes(self) -> int:
        """Bytes of memory held by the frames, transitions and per-world state."""
        tensors = [*self.frames.values(), *self.transitions.values(), self.last_frame]
        return sum(tensor.nbytes for tensor in tensors)

    # ----- resume (the file and the checks: ``replay_snapshot``) ------------------------------------

    def _settings(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SETTINGS}

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: settings, counters and the buffer's own tensors
        (not copies)."""
        return {
            **self._settings(),
            "frames_written": self.frames_written,
            "transitions_written": self.transitions_written,
            "last_frame": self.last_frame,
            "frames": dict(self.frames),
            "transitions": dict(self.transitions),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a ``state_dict`` of a buffer built with the same settings (copies its tensors)."""
        self._restore(state, copy=True)

    def _restore(self, state: dict[str, Any], copy: bool) -> None:
        check_state(state, self._settings(), TRANSITION_FIELDS)

        def own(tensor: torch.Tensor) -> torch.Tensor:
            return tensor.to(self.device, copy=copy)

        self.frames = {key: own(value) for key, value in state["frames"].items()}
        self.transitions = {name: own(value) for name, value in state["transitions"].items()}
        self.last_frame = own(state["last_frame"])
        self.frames_written = int(state["frames_written"])
        self.transitions_written = int(state["transitions_written"])
        self._whole_count = None

    def save(self, path: str | Path) -> None:
        """Write the state to one safetensors file. Not atomic by itself: checkpoints write it into
        a folder that is moved into place whole (``training.checkpoint``)."""
        save_state(self.state_dict(), Path(path))

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> ReplayBuffer:
        """A buffer restored from ``save``."""
        state = load_state(Path(path))
        buffer = cls(**{name: state[name] for name in SETTINGS}, device=device)
        buffer._restore(state, copy=False)  # the tensors just read are nobody else's
        return buffer


def _check_like(
    got: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], got_name: str, expected_name: str
) -> None:
    """``got`` has the keys of ``expected`` and rows of the same shapes."""
    if set(got) != set(expected):
        raise ValueError(
            f"{got_name} keys {sorted(got)} differ from {expected_name} keys {sorted(expected)} "
            f"(missing {sorted(set(expected) - set(got))}, extra {sorted(set(got) - set(expected))})"
        )
    for key, value in got.items():
        if value.shape[1:] != expected[key].shape[1:]:
            raise ValueError(
                f"{got_name}[{key!r}] has rows of shape {tuple(value.shape[1:])}, {expected_name} "
                f"{tuple(expected[key].shape[1:])}"
            )


def _rows_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """bool [M]: rows of ``a`` and ``b`` equal element for element (NaN equal to NaN)."""
    same = a == b
    if a.is_floating_point():
        same |= a.isnan() & b.isnan()
    return same.reshape(len(same), -1).all(dim=1)
