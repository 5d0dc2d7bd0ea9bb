"""Robot-side action buffering for chunked policies: merge overlapping chunks, refill asynchronously.

Time is counted in control steps. A chunk predicted from the observation taken at step ``s`` is
stored with ``start_step=s``: its row ``i`` is the action for step ``s + i``. When the reply arrives
late (at step ``s + d``) the first ``d`` rows are simply never asked for, which is exactly the part
of the chunk that is already in the past.

Merging where chunks overlap (modes in :data:`MERGE_MODES`):

* ``latest``: the action from the newest chunk covering the step (newest = latest ``start_step``,
  ties broken by insertion order), i.e. switch to a new plan as soon as it exists.
* ``ensemble``: temporal ensembling as in ACT (Zhao et al., 2023): the weighted mean of the actions
  that every covering chunk predicts for the step, with weights ``w_i = exp(-decay * i)`` where
  ``i = 0`` is the OLDEST covering chunk. With ``decay > 0`` older predictions weigh more, which
  smooths switching between plans; ``decay = 0`` is a plain mean; a negative decay favours new ones.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MergeFn = Callable[[np.ndarray, float], np.ndarray]


def merge_latest(actions: np.ndarray, decay: float) -> np.ndarray:
    """``actions``: [K, A] predictions for one step, oldest first."""
    return actions[-1]


def merge_ensemble(actions: np.ndarray, decay: float) -> np.ndarray:
    """Weighted mean, ``w_i = exp(-decay * i)`` with ``i = 0`` the oldest prediction (ACT)."""
    weights = np.exp(-decay * np.arange(len(actions), dtype=np.float64))
    weights /= weights.sum()
    return (weights[:, None] * actions).sum(axis=0)


MERGE_MODES: dict[str, MergeFn] = {"latest": merge_latest, "ensemble": merge_ensemble}


class ActionQueue:
    """Thread-safe store of action chunks keyed by the control step of their first action."""

    def __init__(self, merge: str = "latest", ensemble_decay: float = 0.01, max_chunks: int = 64) -> None:
        if merge not in MERGE_MODES:
            raise ValueError(f"unknown merge mode {merge!r}; choose from {sorted(MERGE_MODES)}")
        if not np.isfinite(ensemble_decay):
            raise ValueError("ensemble_decay must be finite")
        self.merge = merge
        self.ensemble_decay = float(ensemble_decay)
        self.max_chunks = max_chunks
        self._merge_fn = MERGE_MODES[merge]
        self._chunks: list[tuple[int, int, np.ndarray]] = []  # (start_step, seq, chunk), oldest first
        self._seq = 0
        self._action_dim: int | None = None
        self._lock = threading.Lock()

    def put(self, chunk: np.ndarray, start_step: int) -> None:
        """Add a chunk whose row 0 applies at control step ``start_step``."""
        arr = np.array(chunk, dtype=np.float32)  # copy: the caller may reuse its buffer
        if arr.ndim != 2 or arr.shape[0] == 0:
            raise ValueError(f"a chunk must be [chunk_len >= 1, action_dim], got shape {arr.shape}")
        with self._lock:
            if self._action_dim is not None and arr.shape[1] != self._action_dim:
                raise ValueError(
                    f"action_dim {arr.shape[1]} differs from earlier chunks ({self._action_dim})"
                )
            self._action_dim = arr.shape[1]
            self._seq += 1
            self._chunks.append((int(start_step), self._seq, arr))
            self._chunks.sort(key=lambda c: (c[0], c[1]))
            del self._chunks[: max(0, len(self._chunks) - self.max_chunks)]

    def pop(self, step: int) -> np.ndarray | None:
        """The action for control step ``step``, or None when no chunk covers it (the robot should
        hold its position). Chunks with no action after ``step`` are dropped afterwards."""
        with self._lock:
            covering = [c[2][step - c[0]] for c in self._chunks if c[0] <= step < c[0] + len(c[2])]
            self._chunks = [c for c in self._chunks if c[0] + len(c[2]) > step + 1]
        if not covering:
            return None
        merged = self._merge_fn(np.stack(covering), self.ensemble_decay)
        return np.asarray(merged, dtype=np.float32)

    def remaining(self, step: int) -> int:
        """Actions of the newest chunk for steps after ``step`` (0 when empty)."""
        with self._lock:
            if not self._chunks:
                return 0
            start, _, chunk = self._chunks[-1]
        return min(len(chunk), max(0, start + len(chunk) - 1 - step))

    def clear(self) -> None:
        with self._lock:
            self._chunks.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._chunks)


class AsyncChunker:
    """Fetch chunks in a background thread so the control loop never waits on the network.

    Call :meth:`observe` every control step: when the newest chunk has fewer than
    ``refill_threshold`` actions left after this step and no request is in flight, the observation is
    sent. :meth:`request` sends one now regardless of the queue. Failures never raise into the
    control loop; they are counted (``failures``, ``consecutive_failures``, ``last_error``) and
    ``observe`` retries after ``retry_interval_s``. If the server stays down the queue runs dry and
    ``queue.pop`` returns None, which the robot side must treat as "hold".

    ``client_infer(observation)`` returns a ``ChunkReply`` (anything with ``.actions``) or an array.
    """

    def __init__(
        self,
        client_infer: Callable[[dict[str, Any]], Any],
        queue: ActionQueue,
        refill_threshold: int,
        retry_interval_s: float = 0.05,
        join_timeout_s: float = 5.0,
    ) -> None:
        self._infer = client_infer
        self.queue = queue
        self.refill_threshold = refill_threshold
        self.retry_interval_s = retry_interval_s
        self.join_timeout_s = join_timeout_s
        self.failures = 0
        self.consecutive_failures = 0
        self.successes = 0
        self.stale_chunks = 0  # replies that arrived after their whole chunk was in the past
        self.last_error: BaseException | None = None
        self.last_reply: Any = None
        self._cond = threading.Condition()
        self._pending: tuple[dict[str, Any], int] | None = None
        self._in_flight = False
        self._closed = False
        self._latest_step = -(2**62)
        self._last_failure_t = -float("inf")
        self._thread = threading.Thread(target=self._run, daemon=True, name="async-chunker")
        self._thread.start()

    def observe(self, observation: dict[str, Any], step: int) -> bool:
        """Per-step hook; returns True when it started a request."""
        with self._cond:
            self._latest_step = max(self._latest_step, step)
            if self._in_flight or self.queue.remaining(step) >= self.refill_threshold:
                return False
            if time.monotonic() - self._last_failure_t < self.retry_interval_s:
                return False
            return self._submit(observation, step)

    def request(self, observation: dict[str, Any], step: int) -> bool:
        """Send ``observation`` (taken at ``step``) now; False if a request is already in flight."""
        with self._cond:
            self._latest_step = max(self._latest_step, step)
            if self._in_flight:
                return False
            return self._submit(observation, step)

    def _submit(self, observation: dict[str, Any], step: int) -> bool:
        if self._closed:
            return False
        # A copy, so the control loop may reuse its buffers after handing the observation over.
        self._pending = (copy.deepcopy(observation), int(step))
        self._in_flight = True
        self._cond.notify_all()
        return True

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no request is in flight; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._in_flight, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._closed)
                if self._closed:
                    return
                assert self._pending is not None
                observation, step = self._pending
                self._pending = None
            try:
                reply = self._infer(observation)
                actions = getattr(reply, "actions", reply)
                self.queue.put(actions, start_step=step)
            except Exception as exc:  # anything: the control loop must keep running
                with self._cond:
                    self.failures += 1
                    self.consecutive_failures += 1
                    self.last_error = exc
                    self._last_failure_t = time.monotonic()
                    self._in_flight = False
                    self._cond.notify_all()
                continue
            with self._cond:
                self.successes += 1
                self.consecutive_failures = 0
                self.last_reply = reply
                if step + len(actions) <= self._latest_step:
                    self.stale_chunks += 1
                self._in_flight = False
                self._cond.notify_all()

    def close(self) -> None:
        """Stop the thread; an in-flight request is abandoned after ``join_timeout_s``."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=self.join_timeout_s)

    def __enter__(self) -> AsyncChunker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
