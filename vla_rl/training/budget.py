"""A run's wall-clock cap (``max_minutes``), evaluations included: it only decides when to stop.

The rule every trainer follows: before each update the run checks that the longest update so far,
plus what it must still do after training (the final evaluation, estimated from what it measured,
and the last checkpoint), fits in the time left; if it does not, training stops there and the
final evaluation still runs inside the cap. Before the first update nothing has measured one, so
the first update always runs when the reserve fits: a cap shorter than one update plus the
evaluations is passed by at most that update. Nothing the run computes reads the clock, so a slower
machine makes fewer updates, never different ones.
"""

from __future__ import annotations

import math
import time


def now_s() -> float:
    """The clock every budget decision reads (``time.perf_counter``)."""
    return time.perf_counter()


class WallClock:
    """The run's clock (continuing the time a resumed run had spent) against ``max_minutes``."""

    def __init__(self, max_minutes: float, elapsed_before_s: float = 0.0) -> None:
        self.max_minutes = max_minutes
        self._start = time.perf_counter() - elapsed_before_s
        self.longest_update_s = 0.0
        """The longest update (rollout + update) measured so far in this process."""
        self.reserve_s = 0.0
        """Seconds kept for what runs after training (final evaluation, last checkpoint)."""

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._start

    @property
    def capped(self) -> bool:
        return self.max_minutes > 0

    def left_s(self) -> float:
        """Seconds left before the cap (infinite without one)."""
        return self.max_minutes * 60.0 - self.elapsed_s if self.capped else math.inf

    def fits(self, seconds: float) -> bool:
        """Whether ``seconds`` more, plus the reserve, end within the cap."""
        return seconds + self.reserve_s <= self.left_s()

    def room_for_update(self) -> bool:
        """Whether one more update (as long as the longest so far) and the reserve fit."""
        return self.fits(self.longest_update_s)

    def record_update(self, seconds: float) -> None:
        self.longest_update_s = max(self.longest_update_s, seconds)


def describe_cap(max_minutes: float) -> str:
    """``cap 2.0 min, evaluations included`` or ``no wall-clock cap``."""
    return f"cap {max_minutes:g} min, evaluations included" if max_minutes > 0 else "no wall-clock cap"
