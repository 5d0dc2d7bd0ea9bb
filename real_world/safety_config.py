"""Limits of the real-robot safety layer (``vla_rl.real_world.safety``), with their checks.

Every limit can be switched off on its own (``math.inf`` for a speed, an age or the jump, ``0`` for
the watchdog or the joint-limit margin, ``None`` for the workspace box); ``enabled=False`` switches
off all of them at once (see ``SafetyLayer`` for what still applies then).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_WORKSPACE_MIN_M = (0.20, -0.40, 0.015)
DEFAULT_WORKSPACE_MAX_M = (0.80, 0.40, 0.50)
"""TCP box (m, robot base frame, table top at z=0) holding everything the simulated tasks use.

Objects, reach targets and pads lie in x 0.32..0.70, y -0.27..0.27 (``OUTER_XY_*`` of the
randomisation, ``ood_position`` included); the scripted push starts up to ~6 cm behind a cube, so
x and y get 8-13 cm of slack. Grasps and pushes put the TCP at the cube centre (z=0.02) and the
fingertips reach ~1 cm below the TCP, so z >= 0.015 keeps them off the table while allowing every
table-height grasp. Reach targets go up to z=0.25 and home is at z=0.21; 0.50 leaves room to lift.
"""


@dataclass
class SafetyConfig:
    """Limits applied to every command before it reaches the robot."""

    enabled: bool = True
    """False: commands pass through unchanged except that non-finite ones are still rejected and a
    pressed e-stop still holds the robot."""
    joint_limit_margin_rad: float = 0.05
    """Distance (rad) kept from each joint limit of the robot description; 0 uses the limits as they
    are (the limits themselves cannot be switched off)."""
    max_joint_speed_rad_s: float = 1.0
    """Largest joint speed (rad/s): a target moves at most this times one control period away from
    the measured angle in each joint. ``math.inf`` disables."""
    max_ee_speed_m_s: float = 0.25
    """Largest TCP speed (m/s): the joint step is scaled down until the TCP (by forward kinematics)
    moves at most this times one control period. ``math.inf`` disables."""
    workspace_min_m: tuple[float, float, float] | None = DEFAULT_WORKSPACE_MIN_M
    """Lower corner (x, y, z in m, robot base frame) of the box the TCP must stay in. ``None`` (for
    both corners) disables the box; ``-math.inf`` disables one side of one axis."""
    workspace_max_m: tuple[float, float, float] | None = DEFAULT_WORKSPACE_MAX_M
    """Upper corner (x, y, z in m, robot base frame) of the TCP box; see ``workspace_min_m``."""
    max_joint_jump_rad: float = 0.5
    """A target farther than this (rad) from the measured angle in any joint is rejected outright and
    the robot holds: such a target is a bug upstream, not a command to follow slowly. ``math.inf``
    disables."""
    max_gripper_speed_m_s: float = 0.1
    """Largest change rate (m/s) of the commanded finger distance relative to the last one sent (the
    Franka Hand's fingers move at most 0.05 m/s each). ``math.inf`` disables; the opening itself is
    always kept in [0, the robot's max opening]."""
    watchdog_periods: int = 3
    """If no fresh command arrives for this many consecutive control periods the robot holds its
    measured pose; before that the last accepted command is re-sent (re-checked). 0 disables."""
    max_joint_state_age_s: float = 0.1
    """Hold if the joint state is older than this (s) when checked. ``math.inf`` disables."""
    max_image_age_s: float = 0.2
    """Hold if any camera image in the observation is older than this (s). ``math.inf`` disables."""

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first field with an impossible value."""
        positive = (
            "max_joint_speed_rad_s",
            "max_ee_speed_m_s",
            "max_joint_jump_rad",
            "max_gripper_speed_m_s",
            "max_joint_state_age_s",
            "max_image_age_s",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int | float) or math.isnan(value) or value <= 0:
                raise ValueError(f"SafetyConfig.{name} must be > 0 (math.inf disables it), got {value!r}")
        margin = self.joint_limit_margin_rad
        if not isinstance(margin, int | float) or not math.isfinite(margin) or margin < 0:
            raise ValueError(f"SafetyConfig.joint_limit_margin_rad must be finite and >= 0, got {margin!r}")
        periods = self.watchdog_periods
        if isinstance(periods, bool) or not isinstance(periods, int) or periods < 0:
            raise ValueError(
                f"SafetyConfig.watchdog_periods must be an int >= 0 (0 disables), got {periods!r}"
            )
        low, high = self.workspace_min_m, self.workspace_max_m
        if (low is None) != (high is None):
            raise ValueError("SafetyConfig.workspace_min_m and workspace_max_m must both be set or both None")
        if low is None or high is None:
            return
        for name, corner in (("workspace_min_m", low), ("workspace_max_m", high)):
            if len(corner) != 3 or any(math.isnan(v) for v in corner):
                raise ValueError(f"SafetyConfig.{name} must be 3 numbers (x, y, z in m), got {corner!r}")
        for axis, lo, hi in zip("xyz", low, high, strict=True):
            if not lo < hi:
                raise ValueError(
                    f"SafetyConfig.workspace_min_m must be below workspace_max_m on every axis; "
                    f"{axis}: {lo} >= {hi}"
                )

    def check_joint_margin(self, lower_rad: tuple[float, ...], upper_rad: tuple[float, ...]) -> None:
        """Raise ``ValueError`` if the margin leaves no room between some joint's limits."""
        for i, (lo, hi) in enumerate(zip(lower_rad, upper_rad, strict=True)):
            if hi - lo <= 2 * self.joint_limit_margin_rad:
                raise ValueError(
                    f"SafetyConfig.joint_limit_margin_rad={self.joint_limit_margin_rad} leaves no room "
                    f"for joint {i + 1} (limits {lo} .. {hi})"
                )
