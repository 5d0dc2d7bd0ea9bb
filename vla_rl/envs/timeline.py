"""Start and end times of rollout phases (simulation, policy) per stage, to see what overlaps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Span:
    phase: str
    """``"sim"`` or ``"policy"``."""
    stage: int
    start_s: float
    end_s: float


class Timeline:
    """Thread-safe record of spans (the physics of a stage runs in a background thread)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._lock = threading.Lock()

    def timed(self, phase: str, stage: int, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` wrapped to record one span per call."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                span = Span(phase, stage, start, time.perf_counter())
                with self._lock:
                    self.spans.append(span)

        return wrapper

    def overlap_s(self, phase_a: str, phase_b: str) -> float:
        """Seconds during which a ``phase_a`` span of one stage and a ``phase_b`` span of another
        stage ran at the same time (summed over pairs)."""
        total = 0.0
        for a in self.spans:
            for b in self.spans:
                if a.phase == phase_a and b.phase == phase_b and a.stage != b.stage:
                    total += max(0.0, min(a.end_s, b.end_s) - max(a.start_s, b.start_s))
        return total
