"""Safety layer between the policy and a real robot, whatever transport carries the commands.

Every control period the deployment loop passes the new command (or ``None`` when the policy had
nothing new) and the latest observation to ``SafetyLayer.check`` and sends only what comes back.
Checks run in this order, the first that fires decides:

1. latched e-stop -> hold (only ``release_estop`` unlatches);
2. joint state older than ``max_joint_state_age_s`` -> hold;
3. any camera image older than ``max_image_age_s`` -> hold;
4. watchdog: ``watchdog_periods`` periods in a row without a command -> hold; before that the last
   accepted command is re-sent, re-checked against the new measurement;
5. NaN/inf (or a wrongly shaped) command -> rejected, hold;
6. a target more than ``max_joint_jump_rad`` from the measured pose -> rejected, hold;
7. otherwise clamp: joint limits minus the margin, per-period joint step from the MEASURED pose,
   TCP speed and workspace box (both by forward kinematics, shrinking the step along the segment
   from the measured pose), gripper opening and gripper speed.

"Hold" means: arm target = measured joint angles, gripper target = the last one sent (or the
measured opening before anything was sent). Clamping relative to the measured pose rather than the
previous target means a lagging or blocked arm never accumulates a large tracking error.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand, RobotError, RobotObservation
from vla_rl.real_world.safety_config import SafetyConfig
from vla_rl.robots.panda import PANDA, RobotDescription

__all__ = ["EVENTS", "SafetyConfig", "SafetyDecision", "SafetyLayer"]

logger = logging.getLogger(__name__)

HOLD_EVENTS = (
    "estop",
    "invalid_joint_state",
    "stale_joint_state",
    "stale_image",
    "watchdog",
    "malformed",
    "non_finite",
    "jump",
)
"""Events after which the robot holds its measured pose (logged as warnings when a streak starts)."""
CLAMP_EVENTS = ("joint_limit", "joint_speed", "ee_speed", "workspace", "gripper")
"""Events that changed a command but still let it through (logged at debug level)."""
EVENTS = HOLD_EVENTS + CLAMP_EVENTS

BISECTION_STEPS = 24
"""Halvings of the step scale for the TCP speed and workspace limits (2^-24 of a step: ~1e-9 m)."""


@dataclass
class SafetyDecision:
    """What the safety layer allows to be sent this control period."""

    command: JointCommand
    """The command to send (always finite)."""
    held: bool
    """True when ``command`` holds the measured pose instead of following the policy."""
    events: list[str] = field(default_factory=list)
    """Names (see ``EVENTS``) of the rejections and clamps that fired this period."""


class SafetyLayer:
    """Checks and clamps joint commands against ``SafetyConfig``; keeps its state between periods.

    With ``config.enabled=False`` commands pass through unchanged, but a command with NaN/inf (or
    the wrong shape) is still rejected (hold), a pressed e-stop still holds, and a missing command
    re-sends the last accepted one without a watchdog.

    ``estop_input`` is polled every period (e.g. a GPIO read or ``threading.Event.is_set``); a
    truthy ``observation.extras["estop"]`` (a transport reporting the robot's own stop) does the
    same. Either latches the e-stop. ``press_estop`` may be called from another thread.
    """

    def __init__(
        self,
        config: SafetyConfig,
        control_hz: float,
        robot: RobotDescription = PANDA,
        kinematics: ArmKinematics | None = None,
        estop_input: Callable[[], bool] | None = None,
    ) -> None:
        config.validate()
        config.check_joint_margin(robot.arm_joint_lower_rad, robot.arm_joint_upper_rad)
        if not (isinstance(control_hz, int | float) and math.isfinite(control_hz) and control_hz > 0):
            raise ValueError(f"control_hz must be a finite number > 0, got {control_hz!r}")
        self.config = config
        self.robot = robot
        self.period_s = 1.0 / control_hz
        self.estop_input = estop_input
        self.lower_rad = robot.arm_lower + config.joint_limit_margin_rad
        """Joint limits after the margin (rad)."""
        self.upper_rad = robot.arm_upper - config.joint_limit_margin_rad
        self._box = (
            None
            if config.workspace_min_m is None or config.workspace_max_m is None
            else (np.asarray(config.workspace_min_m, float), np.asarray(config.workspace_max_m, float))
        )
        needs_fk = config.enabled and (math.isfinite(config.max_ee_speed_m_s) or self._box is not None)
        if kinematics is None and needs_fk:
            kinematics = ArmKinematics(robot)
        self.kinematics = kinematics
        self.counts: dict[str, int] = dict.fromkeys(EVENTS, 0)
        """Event name -> how many periods it fired in."""
        self.estop_reason: str | None = None
        """Why the e-stop is latched, or None when it is not."""
        self._last_accepted: JointCommand | None = None
        self._last_sent: JointCommand | None = None
        self._missing_periods = 0
        self._previous_events: frozenset[str] = frozenset()

    # ------------------------------------------------------------------------------ e-stop
    @property
    def estopped(self) -> bool:
        return self.estop_reason is not None

    def press_estop(self, reason: str = "operator") -> None:
        """Latch the e-stop: every period holds until ``release_estop``."""
        if self.estop_reason is None:
            self.estop_reason = reason
            logger.warning("E-stop latched: %s", reason)

    def release_estop(self) -> None:
        """Unlatch the e-stop (an explicit operator action). The next command is checked afresh."""
        if self.estop_reason is not None:
            logger.warning("E-stop released (was: %s)", self.estop_reason)
        self.estop_reason = None
        self._last_accepted = None

    def reset(self) -> None:
        """Forget the commands of the previous episode (the e-stop and the counts stay)."""
        self._last_accepted = None
        self._last_sent = None
        self._missing_periods = 0

    # ------------------------------------------------------------------------------ check
    def check(
        self, command: JointCommand | None, observation: RobotObservation, now_s: float
    ) -> SafetyDecision:
        """The command that may be sent this period; ``command=None``: no fresh command arrived.

        ``now_s`` is on the clock of the observation's stamps. Raises ``RobotError`` only when the
        measured joint state is not finite before anything was sent (no pose to hold at).
        """
        events: list[str] = []
        decision = self._decide(command, observation, now_s, events)
        self._previous_events = frozenset(events)
        self._last_sent = decision.command.copy()
        if decision.held:
            self._last_accepted = None  # after a hold only a fresh command moves the robot again
        return decision

    def _decide(
        self, command: JointCommand | None, obs: RobotObservation, now_s: float, events: list[str]
    ) -> SafetyDecision:
        cfg = self.config
        self._missing_periods = self._missing_periods + 1 if command is None else 0
        measured = np.asarray(obs.arm_qpos_rad, dtype=np.float64)
        measured_gripper = float(obs.gripper_opening_m)
        if measured.shape != (self.robot.num_arm_joints,) or not (
            np.isfinite(measured).all() and math.isfinite(measured_gripper)
        ):
            self.press_estop("joint state not finite")
            if self._last_sent is None:
                raise RobotError("joint state is not finite and nothing was sent yet: no pose to hold")
            self._fire(events, "invalid_joint_state", f"measured {_fmt(measured)}, {measured_gripper:.3g}")
            return SafetyDecision(self._last_sent.copy(), True, events)

        def hold(event: str | None, detail: str = "") -> SafetyDecision:
            if event is not None:
                self._fire(events, event, detail)
            if self._last_sent is not None:
                gripper = self._last_sent.gripper_opening_m
            else:
                gripper = float(np.clip(measured_gripper, 0.0, self.robot.gripper_max_opening_m))
            return SafetyDecision(JointCommand(measured.copy(), gripper, now_s), True, events)

        if self.estop_input is not None and self.estop_input():
            self.press_estop("e-stop input")
        if obs.extras.get("estop"):
            self.press_estop("robot reported an e-stop")
        if self.estop_reason is not None:
            return hold("estop", self.estop_reason)

        if cfg.enabled:
            age = now_s - obs.joint_state_stamp_s
            if not age <= cfg.max_joint_state_age_s:  # also catches NaN stamps
                return hold("stale_joint_state", f"joint state is {age:.3g} s old")
            for camera, stamp in obs.image_stamps_s.items():
                age = now_s - stamp
                if not age <= cfg.max_image_age_s:
                    return hold("stale_image", f"camera {camera!r} image is {age:.3g} s old")

        if command is None:
            if cfg.enabled and cfg.watchdog_periods and self._missing_periods >= cfg.watchdog_periods:
                return hold("watchdog", f"no command for {self._missing_periods} periods")
            if self._last_accepted is None:
                return hold(None)
            command = self._last_accepted

        parsed = _parse(command, self.robot.num_arm_joints)
        if parsed is None:
            return hold("malformed", f"arm target {command.arm_qpos_rad!r}")
        target, gripper = parsed
        if not (np.isfinite(target).all() and math.isfinite(gripper)):
            return hold("non_finite", f"arm {_fmt(target)}, gripper {gripper:.3g}")
        if not cfg.enabled:  # passed through unclamped
            self._last_accepted = command.copy()
            return SafetyDecision(JointCommand(target, gripper, command.stamp_s), False, events)
        jump = np.abs(target - measured)
        if np.any(jump > cfg.max_joint_jump_rad):
            joint = int(np.argmax(jump))
            return hold("jump", f"joint {joint + 1} target is {jump[joint]:.3g} rad from its angle")

        self._last_accepted = command.copy()
        arm = self._clamp_arm(target, measured, events)
        gripper = self._clamp_gripper(gripper, measured_gripper, events)
        return SafetyDecision(JointCommand(arm, gripper, command.stamp_s), False, events)

    # ------------------------------------------------------------------------------ clamps
    def _clamp_arm(self, target: np.ndarray, measured: np.ndarray, events: list[str]) -> np.ndarray:
        cfg = self.config
        # A joint already beyond its (margin-shrunk) limit may stay where it is or move back, never
        # further out; forcing it inside at once could exceed the speed limit.
        lower = np.minimum(self.lower_rad, measured)
        upper = np.maximum(self.upper_rad, measured)
        clamped = np.clip(target, lower, upper)
        if np.any(clamped != target):
            self._fire(events, "joint_limit", f"target {_fmt(target)} -> {_fmt(clamped)}")
        max_step = cfg.max_joint_speed_rad_s * self.period_s
        stepped = np.clip(clamped, measured - max_step, measured + max_step)
        if np.any(stepped != clamped):
            self._fire(
                events, "joint_speed", f"step {_fmt(clamped - measured)} -> {_fmt(stepped - measured)}"
            )
        delta = stepped - measured
        if self.kinematics is None or not np.any(delta):
            return stepped

        # Both limits below shrink the step along the segment from the measured pose, which keeps
        # the joint-limit and joint-speed clamps satisfied: every point of it lies between the two.
        start = self._tcp(measured)
        max_move = cfg.max_ee_speed_m_s * self.period_s
        start_excess = self._box_excess(start)

        def speed_ok(scale: float) -> bool:
            return float(np.linalg.norm(self._tcp(measured + scale * delta) - start)) <= max_move

        def box_ok(scale: float) -> bool:
            return self._box_excess(self._tcp(measured + scale * delta)) <= start_excess

        scale = 1.0
        if math.isfinite(max_move) and not speed_ok(scale):
            scale = _largest_scale(speed_ok, scale)
            self._fire(events, "ee_speed", f"joint step scaled by {scale:.3f}")
        if self._box is not None and not box_ok(scale):
            scale = _largest_scale(lambda s: box_ok(s) and speed_ok(s), scale)
            self._fire(events, "workspace", f"TCP {_fmt(start)} kept in the box: step scaled by {scale:.3f}")
        return measured + scale * delta if scale < 1.0 else stepped

    def _clamp_gripper(self, gripper: float, measured: float, events: list[str]) -> float:
        max_opening = self.robot.gripper_max_opening_m
        clamped = min(max(gripper, 0.0), max_opening)
        reference = self._last_sent.gripper_opening_m if self._last_sent is not None else measured
        reference = min(max(reference, 0.0), max_opening)
        max_step = self.config.max_gripper_speed_m_s * self.period_s
        clamped = min(max(clamped, reference - max_step), reference + max_step)
        if clamped != gripper:
            self._fire(events, "gripper", f"opening {gripper:.4f} -> {clamped:.4f} m")
        return clamped

    def _tcp(self, arm_qpos_rad: np.ndarray) -> np.ndarray:
        assert self.kinematics is not None
        return self.kinematics.tcp_pose(arm_qpos_rad)[0]

    def _box_excess(self, tcp: np.ndarray) -> float:
        """Distance (m) from ``tcp`` to the workspace box; 0 inside or with no box."""
        if self._box is None:
            return 0.0
        low, high = self._box
        return float(np.linalg.norm(np.maximum(np.maximum(low - tcp, tcp - high), 0.0)))

    # ------------------------------------------------------------------------------ logging
    def _fire(self, events: list[str], event: str, detail: str) -> None:
        events.append(event)
        self.counts[event] = self.counts.get(event, 0) + 1
        # Warn when a hold starts, not every period it lasts; clamps are routine, so debug only.
        if event in HOLD_EVENTS and event not in self._previous_events:
            logger.warning("safety %s: holding the measured pose (%s)", event, detail)
        else:
            logger.debug("safety %s: %s", event, detail)


def _fmt(values: np.ndarray) -> str:
    return np.array2string(np.asarray(values), precision=3, separator=", ", max_line_width=200)


def _parse(command: JointCommand, num_joints: int) -> tuple[np.ndarray, float] | None:
    """Arm target as float64 [num_joints] and the gripper opening, or None if they are not numbers."""
    try:
        target = np.array(command.arm_qpos_rad, dtype=np.float64)
        gripper = float(command.gripper_opening_m)
    except (TypeError, ValueError):
        return None
    return (target, gripper) if target.shape == (num_joints,) else None


def _largest_scale(ok: Callable[[float], bool], upper: float) -> float:
    """Largest scale in [0, upper] (to within a bisection) with ``ok``; ``ok(0)`` must hold.

    Returns the low end of the final bracket, so the result always satisfies ``ok`` even where the
    condition is not monotonic along the segment.
    """
    low, high = 0.0, upper
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (low + high)
        if ok(mid):
            low = mid
        else:
            high = mid
    return low
