"""The deployment side's handle on the simulated robot, whatever the transport: start episodes from
seeds, read success (see ``vla_rl.real_world.topics``)."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from vla_rl.real_world.robot import RobotError
from vla_rl.real_world.topics import SIM_STATUS_FIELDS

STAMP_TOLERANCE_S = 1e-6
"""Stamps travel as (sec, nsec) in headers and as float64 in the status: equal within this."""


@dataclass(frozen=True)
class SimStatus:
    """One period of the simulated robot (fields of ``SIM_STATUS_FIELDS``)."""

    episode: float
    step: float
    success: float
    done: float
    command_latency_s: float
    stamp_s: float


class SimControl(Protocol):
    """Start episodes of the simulated robot from seeds and read its status."""

    def reset(self, seed: int, timeout_s: float = 10.0) -> SimStatus: ...

    def status_at(self, stamp_s: float, timeout_s: float) -> SimStatus | None: ...

    def close(self) -> None: ...


class StatusHistory:
    """The transport-independent half of a ``SimControl``: the recent status messages, waiting for
    a new episode after a seed was sent, and finding the status of a joint state by its stamp."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._history: deque[SimStatus] = deque(maxlen=64)

    def add(self, values: Sequence[float]) -> None:
        """A status message's data (``SIM_STATUS_FIELDS`` in order) arrived."""
        status = SimStatus(**dict(zip(SIM_STATUS_FIELDS, map(float, values), strict=True)))
        with self._cond:
            self._history.append(status)
            self._cond.notify_all()

    def start_episode(
        self, send_seed: Callable[[], None], peer_ready: Callable[[], bool], timeout_s: float
    ) -> SimStatus:
        """Wait until the node listens (a seed sent before that is lost) and reports (its status
        says which episode runs now), ``send_seed``, and return the new episode's first status."""
        deadline = time.monotonic() + timeout_s
        while not peer_ready() and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._cond:
            self._cond.wait_for(lambda: bool(self._history), max(0.0, deadline - time.monotonic()))
            before = self._history[-1].episode if self._history else -1
        send_seed()
        with self._cond:
            ok = self._cond.wait_for(
                lambda: (
                    bool(self._history) and self._history[-1].episode > before and self._history[-1].step == 0
                ),
                max(0.0, deadline - time.monotonic()),
            )
            if not ok:
                raise RobotError(f"the simulated robot did not start an episode within {timeout_s} s")
            return self._history[-1]

    def status_at(self, stamp_s: float, timeout_s: float) -> SimStatus | None:
        """The status published with the joint state stamped ``stamp_s`` (it may trail the joint
        state by a moment: each topic travels on its own); None if it does not come in time."""
        with self._cond:
            found: list[SimStatus] = []

            def arrived() -> bool:
                found[:] = [s for s in self._history if abs(s.stamp_s - stamp_s) < STAMP_TOLERANCE_S]
                return bool(found)

            self._cond.wait_for(arrived, timeout_s)
            return found[0] if found else None
