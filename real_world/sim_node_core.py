"""What the simulated robot node does whatever carries its messages (ROS 1, ROS 2).

``SimNodeCore`` owns the ``SimulatedRobot`` and the bookkeeping around it: the latest joint targets,
a pending reset, the start of the current episode (commands computed from an observation stamped
before it are dropped), the latency of every command applied (observation stamp to arrival) and the
statistics file. A transport's node feeds it decoded commands from its subscription callbacks and
gives ``tick`` a function that publishes one period's snapshot.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from vla_rl.real_world.sim_robot import SimSnapshot, SimulatedRobot
from vla_rl.real_world.topics import SIM_STATUS_FIELDS

from vla_rl.data.lerobot_layout import atomic_write_text
from vla_rl.envs.config import EnvConfig

log = logging.getLogger(__name__)

PublishFn = Callable[[SimSnapshot, float, float], None]
"""(snapshot, stamp_s, command_latency_s) -> None: publish one control period."""


def status_values(snapshot: SimSnapshot, stamp_s: float, latency_s: float) -> np.ndarray:
    """The status message's entries (``SIM_STATUS_FIELDS``) of one period."""
    values = {
        "episode": snapshot.episode,
        "step": snapshot.step,
        "success": float(snapshot.success),
        "done": float(snapshot.done),
        "command_latency_s": latency_s,
        "stamp_s": stamp_s,
    }
    return np.asarray([values[name] for name in SIM_STATUS_FIELDS], dtype=np.float64)


class SimNodeCore:
    """A ``SimulatedRobot`` stepped once per control period towards the latest commands.

    ``clock`` stamps each period (seconds); a transport whose stamps are not float seconds passes
    a clock that rounds to what its messages carry, so stamps round-trip exactly.
    """

    def __init__(
        self,
        env_cfg: EnvConfig,
        stats_path: Path | None = None,
        clock: Callable[[], float] = time.time,
        sim: SimulatedRobot | None = None,
    ) -> None:
        self.sim = sim or SimulatedRobot(env_cfg)
        self.stats_path = stats_path
        self.clock = clock
        self._lock = threading.Lock()
        self._pending_seed: int | None = None
        self._episode_start_s = math.inf
        self._last_latency_s = math.nan
        self.latencies_s: list[float] = []
        """Observation stamp to command arrival of every command applied."""
        self.dropped_commands = 0
        """Commands computed from an observation of an earlier episode (ignored)."""

    @property
    def control_hz(self) -> float:
        return self.sim.control_hz

    # ------------------------------------------------------------------------ inputs
    def on_command(self, points: Sequence[np.ndarray], stamp_s: float, arrival_s: float) -> bool:
        """Joint targets of a trajectory (the first point is applied) computed from the observation
        stamped ``stamp_s``; False if dropped (no point, or stamped before this episode began)."""
        with self._lock:
            if len(points) == 0 or stamp_s < self._episode_start_s:
                self.dropped_commands += 1
                return False
            self.sim.set_targets(arm_qpos_rad=points[0])
            self._last_latency_s = arrival_s - stamp_s
            self.latencies_s.append(self._last_latency_s)
            return True

    def on_gripper(self, opening_m: float) -> None:
        with self._lock:
            self.sim.set_targets(gripper_opening_m=float(opening_m))

    def on_reset(self, seed: int) -> None:
        """Start an episode from ``seed`` at the next period."""
        with self._lock:
            self._pending_seed = int(seed)

    # ------------------------------------------------------------------------ loop
    def tick(self, publish: PublishFn) -> SimSnapshot:
        """One control period: a pending reset, else a physics step; then ``publish`` it."""
        with self._lock:
            seed, self._pending_seed = self._pending_seed, None
            if seed is not None:
                snapshot = self.sim.reset(seed)
                self._last_latency_s = math.nan
            else:
                snapshot = self.sim.step()
            stamp_s = self.clock()
            if seed is not None:
                self._episode_start_s = stamp_s
            latency = self._last_latency_s
        publish(snapshot, stamp_s, latency)
        if snapshot.done and seed is None and snapshot.step and self.stats_path is not None:
            self.write_stats()
        return snapshot

    def spin(
        self, publish: PublishFn, max_seconds: float = math.inf, stop: threading.Event | None = None
    ) -> None:
        """Tick at the control rate until ``stop`` is set or ``max_seconds`` pass. A period that
        overran is not made up for with a burst of ticks: the schedule restarts from now."""
        period_s = 1.0 / self.control_hz
        deadline = time.monotonic() + max_seconds
        next_tick = time.monotonic()
        log.info("simulated robot running at %.1f Hz", self.control_hz)
        while (stop is None or not stop.is_set()) and time.monotonic() < deadline:
            self.tick(publish)
            next_tick += period_s
            delay = next_tick - time.monotonic()
            if delay > 0:
                if stop is not None:
                    stop.wait(delay)
                else:
                    time.sleep(delay)
            else:
                next_tick = time.monotonic()

    # ------------------------------------------------------------------------ stats
    def write_stats(self) -> None:
        """Command latencies and dropped commands as JSON (atomically: write, then rename)."""
        assert self.stats_path is not None
        with self._lock:
            stats = {"latencies_s": list(self.latencies_s), "dropped_commands": self.dropped_commands}
        atomic_write_text(self.stats_path, json.dumps(stats))

    def close(self) -> None:
        """Write the statistics (if a path was given) and close the simulator."""
        if self.stats_path is not None:
            self.write_stats()
        self.sim.close()
