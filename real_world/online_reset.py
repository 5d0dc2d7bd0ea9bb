"""What happens between two episodes of the online actor (``reset.kind``).

* ``SimReset``: the simulated robot starts the next episode from a seed (rehearsals).
* ``PoseReset``: the arm drives to a home pose, every period's target a bounded step from the
  measured pose, through the safety layer (``SafeRobot.apply``), like any other command.
* ``PersonReset``: the actor sends nothing and waits until a person says the scene is ready: Enter
  on the actor's terminal, or a message on a ROS 1 topic (std_msgs/Empty), e.g. from a button.

``reset`` returns the stamp after which observations belong to the new episode.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod

import numpy as np
from vla_rl.real_world.console_input import ConsoleLines
from vla_rl.real_world.online_config import ResetSection
from vla_rl.real_world.robot import JointCommand, RobotError
from vla_rl.real_world.safe_robot import SafeRobot
from vla_rl.real_world.sim_control import SimControl
from vla_rl.robots.panda import PANDA

log = logging.getLogger(__name__)

STAMP_MARGIN_S = 1e-5
"""Less than a control period, more than the rounding of stamps that crossed a transport."""


class ResetRoutine(ABC):
    @abstractmethod
    def reset(self, seed: int) -> float:
        """Make the scene ready for an episode; the stamp after which observations are new."""


class SimReset(ResetRoutine):
    def __init__(self, sim: SimControl) -> None:
        self.sim = sim

    def reset(self, seed: int) -> float:
        # The reset's own observation counts as new (see ``deploy.STAMP_MARGIN_S``).
        return self.sim.reset(seed).stamp_s - STAMP_MARGIN_S


class PoseReset(ResetRoutine):
    """Drive to ``home`` in steps of at most ``max_joint_step_rad`` per joint and period."""

    def __init__(self, robot: SafeRobot, settings: ResetSection, period_s: float) -> None:
        self.robot, self.settings, self.period_s = robot, settings, period_s
        home = settings.home_arm_qpos_rad or PANDA.home_arm_qpos
        self.home = np.asarray(home, np.float64)
        self.periods_used = 0
        """Control periods the last reset took."""

    def reset(self, seed: int) -> float:
        s = self.settings
        stamp = -np.inf
        self.robot.safety.reset()
        for period in range(s.max_periods):
            fresh = self.robot.wait_for_new_observation(
                stamp, self.robot.safety.config.watchdog_periods * self.period_s
            )
            obs = self.robot.get_observation()
            stamp = obs.joint_state_stamp_s
            error = self.home - obs.arm_qpos_rad
            if np.max(np.abs(error)) <= s.tolerance_rad:
                self.periods_used = period
                return stamp
            if not fresh:
                self.robot.apply(None, obs)
                continue
            step = np.clip(error, -s.max_joint_step_rad, s.max_joint_step_rad)
            target = JointCommand(obs.arm_qpos_rad + step, s.home_gripper_opening_m, stamp)
            self.robot.apply(target, obs)
        self.periods_used = s.max_periods
        log.warning("the arm did not reach home within %d periods; the episode starts anyway", s.max_periods)
        return stamp


class PersonReset(ResetRoutine):
    """Waits for Enter on the console, or for a message on a ROS 1 topic (see the module docstring)."""

    def __init__(self, settings: ResetSection, console: ConsoleLines | None = None) -> None:
        self.settings = settings
        self.console = console
        self._ready = threading.Event()
        self._subscriber = None
        if settings.person_topic:
            from vla_rl.real_world.ros1.messages import Ros1Messages

            messages = Ros1Messages()
            empty = messages.type("std_msgs/msg/Empty")
            self._subscriber = messages.rospy.Subscriber(
                settings.person_topic, empty, lambda _: self._ready.set()
            )
        elif self.console is None:
            self.console = ConsoleLines()

    def reset(self, seed: int) -> float:
        timeout_s = self.settings.person_timeout_s if self.settings.person_timeout_s > 0 else None
        if self._subscriber is not None:
            self._ready.clear()
            print(f"reset the scene, then publish on {self.settings.person_topic}", flush=True)
            if not self._ready.wait(timeout_s):
                raise RobotError(
                    f"nobody confirmed the reset on {self.settings.person_topic} in {timeout_s} s"
                )
            return time.time()
        assert self.console is not None
        self.console.drain()
        print("reset the scene, then press Enter", flush=True)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            line = self.console.get(left)
            if line == "":
                return time.time()
            if line is None:
                raise RobotError("nobody confirmed the reset (the terminal closed or the wait timed out)")


def reset_routine(
    settings: ResetSection,
    robot: SafeRobot,
    sim: SimControl | None,
    period_s: float,
    console: ConsoleLines | None = None,
) -> ResetRoutine:
    """The routine ``settings.kind`` names (validated by the config's checks)."""
    if settings.kind == "sim":
        if sim is None:
            raise RobotError("reset.kind=sim needs the simulated robot's control handle")
        return SimReset(sim)
    if settings.kind == "pose":
        return PoseReset(robot, settings, period_s)
    return PersonReset(settings, console)
