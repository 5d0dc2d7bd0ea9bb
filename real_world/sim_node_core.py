"""What the simulated robot node does whatever carries its messages (ROS 1, ROS 2).

``SimNodeCore`` owns the ``SimulatedRobot`` and the bookkeeping around it: the latest joint targets,
a pending reset, the start of the current episode (commands computed from an observation stamped
before it are dropped), the latency of every command applied (observation stamp to arrival) and the
statistics file. It publishes each period's snapshot with the messages of its ROS version. A
transport's node subclasses it: it makes the publishers and feeds the commands its subscriptions
receive to ``on_command_message``, ``on_gripper`` and ``on_reset_message``.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from vla_rl.real_world.ros_messages import ARM_JOINT_NAMES, FINGER_JOINT_NAMES, RosMessages, parse_trajectory
from vla_rl.real_world.sim_robot import SimSnapshot, SimulatedRobot
from vla_rl.real_world.topics import SIM_STATUS_FIELDS

from vla_rl.data.lerobot_layout import atomic_write_text
from vla_rl.envs.config import EnvConfig

log = logging.getLogger(__name__)


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


class Publisher(Protocol):
    def publish(self, msg: Any) -> None: ...


class SimNodeCore:
    """A ``SimulatedRobot`` stepped once per control period towards the latest commands.

    ``clock`` stamps each period (seconds); a transport whose stamps are not float seconds passes
    a clock that rounds to what its messages carry, so stamps round-trip exactly. A subclass sets
    the publishers of the joint states, each camera's images, the task state and the status.
    """

    messages: RosMessages
    joint_pub: Publisher
    image_pubs: Mapping[str, Publisher]
    task_pub: Publisher
    status_pub: Publisher

    def __init__(
        self,
        env_cfg: EnvConfig,
        stats_path: Path | None = None,
        clock: Callable[[], float] = time.time,
        sim: SimulatedRobot | None = None,
        image_transport: str = "raw",
    ) -> None:
        self.sim = sim or SimulatedRobot(env_cfg)
        self.stats_path = stats_path
        self.image_transport = image_transport
        """``raw`` (rgb8 sensor_msgs/Image) or ``compressed`` (sensor_msgs/CompressedImage, jpeg of
        quality 90) on the topics ``image_channel`` names."""
        self.clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
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
    def on_command_message(self, msg: Any) -> bool:
        """A JointTrajectory arrived (see ``on_command``); its header stamp is the observation's."""
        arrival_s = time.time()
        return self.on_command(parse_trajectory(msg), self.messages.seconds(msg.header.stamp), arrival_s)

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

    def on_reset_message(self, msg: Any) -> None:
        """A std_msgs/Int64 seed arrived."""
        self.on_reset(int(msg.data))

    # ------------------------------------------------------------------------ loop
    def tick(self) -> SimSnapshot:
        """One control period: a pending reset, else a physics step; then publish it."""
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
        self.publish(snapshot, stamp_s, latency)
        if snapshot.done and seed is None and snapshot.step and self.stats_path is not None:
            self.write_stats()
        return snapshot

    def spin(self, max_seconds: float = math.inf) -> None:
        """Tick at the control rate until ``stop`` is called (or ``max_seconds`` pass). A period that
        overran is not made up for with a burst of ticks: the schedule restarts from now."""
        period_s = 1.0 / self.control_hz
        deadline = time.monotonic() + max_seconds
        next_tick = time.monotonic()
        log.info("simulated robot running at %.1f Hz", self.control_hz)
        while not self._stop.is_set() and time.monotonic() < deadline:
            self.tick()
            next_tick += period_s
            delay = next_tick - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
            else:
                next_tick = time.monotonic()

    def stop(self) -> None:
        """Make ``spin`` return after the current period (from another thread)."""
        self._stop.set()

    def publish(self, snapshot: SimSnapshot, stamp_s: float, latency_s: float) -> None:
        """One period: each camera's image (``image_transport``), the task state, the status
        (``SIM_STATUS_FIELDS``) and the joint state (``joint1..7`` and both fingers at half the opening
        each), all stamped ``stamp_s``."""
        messages = self.messages
        for camera, publisher in self.image_pubs.items():
            rgb = snapshot.images[camera]
            if self.image_transport == "compressed":
                msg = messages.compressed_image_message(stamp_s, rgb, "jpeg", quality=90, frame_id=camera)
            else:
                msg = messages.image_message(stamp_s, rgb, frame_id=camera)
            publisher.publish(msg)
        if snapshot.task_state is not None:
            self.task_pub.publish(messages.float64_array_message(snapshot.task_state, "task_state"))
        status = status_values(snapshot, stamp_s, latency_s)
        self.status_pub.publish(messages.float64_array_message(status, ",".join(SIM_STATUS_FIELDS)))
        opening = snapshot.gripper_opening_m
        position = np.concatenate([snapshot.arm_qpos_rad, [opening / 2, opening / 2]])
        velocity = np.concatenate([snapshot.arm_qvel_rad_s, [0.0, 0.0]])
        names = ARM_JOINT_NAMES + FINGER_JOINT_NAMES
        # The joint state goes last: a subscriber woken by it likely (not certainly: each topic
        # travels on its own) has the images and task state of the same period already.
        self.joint_pub.publish(messages.joint_state_message(stamp_s, names, position, velocity))

    # ------------------------------------------------------------------------ stats
    def write_stats(self) -> None:
        """Command latencies and dropped commands as JSON (atomically: write, then rename)."""
        assert self.stats_path is not None
        with self._lock:
            stats = {"latencies_s": list(self.latencies_s), "dropped_commands": self.dropped_commands}
        atomic_write_text(self.stats_path, json.dumps(stats))

    def close(self) -> None:
        """Stop spinning, write the statistics (if a path was given) and close the simulator."""
        self._stop.set()
        if self.stats_path is not None:
            self.write_stats()
        self.sim.close()
