"""What every transport's handle on the simulated robot reports (see ``vla_rl.real_world.topics``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
