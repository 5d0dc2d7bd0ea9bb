"""Safety layer: hand-worked cases for each rule, then properties over arbitrary inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand, RobotError, RobotObservation
from vla_rl.real_world.safety import SafetyConfig, SafetyDecision, SafetyLayer
from vla_rl.robots.panda import PANDA
from vla_rl.sims.mujoco.randomization import OUTER_XY_HIGH, OUTER_XY_LOW
from vla_rl.sims.tasks.base import CUBE_HALF_SIZE_M
from vla_rl.sims.tasks.reach import TARGET_HEIGHT_RANGE_M

KIN = ArmKinematics(PANDA)
HOME = np.asarray(PANDA.home_arm_qpos)
HZ = 50.0
PERIOD = 1.0 / HZ
LOWER, UPPER = PANDA.arm_lower, PANDA.arm_upper
MAX_OPEN = PANDA.gripper_max_opening_m


def tcp(q: np.ndarray) -> np.ndarray:
    return KIN.tcp_pose(q)[0]


def obs(q=HOME, gripper=0.04, stamp=0.0, images=None, extras=None) -> RobotObservation:
    return RobotObservation(
        arm_qpos_rad=np.asarray(q, dtype=np.float64),
        arm_qvel_rad_s=np.zeros(7),
        gripper_opening_m=gripper,
        joint_state_stamp_s=stamp,
        image_stamps_s=images or {},
        extras=extras or {},
    )


def cmd(q, gripper=0.04, stamp=0.0) -> JointCommand:
    return JointCommand(np.asarray(q, dtype=np.float64), gripper, stamp)


def layer(**overrides) -> SafetyLayer:
    return SafetyLayer(SafetyConfig(**overrides), HZ, kinematics=KIN)


def joints_only(**overrides) -> SafetyLayer:
    """Layer without the FK-based limits, so joint-space clamps can be checked exactly."""
    return layer(max_ee_speed_m_s=math.inf, workspace_min_m=None, workspace_max_m=None, **overrides)


def offset(joint: int, value: float) -> np.ndarray:
    q = HOME.copy()
    q[joint] += value
    return q


def assert_held(decision: SafetyDecision, measured: np.ndarray, event: str | None) -> None:
    assert decision.held
    np.testing.assert_array_equal(decision.command.arm_qpos_rad, measured)
    if event is not None:
        assert event in decision.events


# ---------------------------------------------------------------------------------- clamps
def test_joint_step_is_clamped_to_exactly_speed_times_period():
    safety = joints_only(max_joint_speed_rad_s=1.0)
    target = HOME.copy()
    target[0] += 0.3
    target[2] -= 0.2
    target[4] += 0.01  # within one step: untouched
    decision = safety.check(cmd(target), obs(), 0.0)
    assert not decision.held and decision.events == ["joint_speed"]
    expected = HOME.copy()
    expected[0] += 1.0 / HZ
    expected[2] -= 1.0 / HZ
    expected[4] += 0.01
    np.testing.assert_allclose(decision.command.arm_qpos_rad, expected, rtol=0, atol=1e-12)
    assert safety.counts["joint_speed"] == 1


def test_joint_limit_margin_keeps_targets_off_the_limits():
    safety = joints_only(max_joint_speed_rad_s=math.inf, joint_limit_margin_rad=0.05)
    measured = HOME.copy()
    measured[3] = UPPER[3] - 0.2
    target = measured.copy()
    target[3] = UPPER[3] + 0.1
    decision = safety.check(cmd(target), obs(measured), 0.0)
    assert decision.events == ["joint_limit"]
    assert decision.command.arm_qpos_rad[3] == pytest.approx(UPPER[3] - 0.05, abs=1e-12)
    assert safety.counts["joint_limit"] == 1


def test_joint_inside_the_margin_may_not_move_further_out_but_may_move_back():
    safety = joints_only()
    measured = HOME.copy()
    measured[5] = LOWER[5] + 0.01  # inside the 0.05 rad margin
    outward = safety.check(cmd(measured - np.eye(7)[5] * 0.1), obs(measured), 0.0)
    assert outward.command.arm_qpos_rad[5] == pytest.approx(measured[5])
    inward = safety.check(cmd(measured + np.eye(7)[5] * 0.1), obs(measured), 0.0)
    assert inward.command.arm_qpos_rad[5] == pytest.approx(measured[5] + 1.0 / HZ)


def test_tcp_speed_scales_the_joint_step_down():
    safety = layer(max_ee_speed_m_s=0.25, workspace_min_m=None, workspace_max_m=None)
    target = offset(0, 0.02)  # base rotation: ~0.49 m * 0.02 rad ~ 1 cm > 0.25 m/s / 50 Hz = 5 mm
    decision = safety.check(cmd(target), obs(), 0.0)
    assert decision.events == ["ee_speed"]
    moved = np.linalg.norm(tcp(decision.command.arm_qpos_rad) - tcp(HOME))
    assert 0.25 / HZ - 1e-6 < moved <= 0.25 / HZ
    step = decision.command.arm_qpos_rad - HOME
    assert step[0] > 0 and np.count_nonzero(step) == 1  # same direction, only shorter


def test_workspace_box_shrinks_the_step_to_stay_inside():
    home_tcp = tcp(HOME)
    box = {"workspace_min_m": tuple(home_tcp - 0.1), "workspace_max_m": tuple(home_tcp + [0.1, 0.1, 0.002])}
    safety = layer(max_joint_speed_rad_s=math.inf, max_ee_speed_m_s=math.inf, **box)
    target = offset(3, 0.04)  # unbending the elbow raises the TCP by more than 2 mm
    assert tcp(target)[2] > home_tcp[2] + 0.002
    decision = safety.check(cmd(target), obs(), 0.0)
    assert "workspace" in decision.events and not decision.held
    reached = tcp(decision.command.arm_qpos_rad)
    assert reached[2] <= home_tcp[2] + 0.002
    assert reached[2] > home_tcp[2] + 0.0019  # shrunk only as much as needed


def test_outside_the_box_only_steps_that_do_not_move_away_are_allowed():
    home_tcp = tcp(HOME)
    low, high = home_tcp + [-0.5, -0.5, 0.05], home_tcp + [0.5, 0.5, 0.3]  # TCP 5 cm below the box
    safety = layer(max_ee_speed_m_s=math.inf, workspace_min_m=tuple(low), workspace_max_m=tuple(high))
    down, up = offset(3, -0.02), offset(3, 0.02)
    assert tcp(down)[2] < home_tcp[2] < tcp(up)[2]
    away = safety.check(cmd(down), obs(), 0.0)
    assert tcp(away.command.arm_qpos_rad)[2] >= home_tcp[2] - 1e-9
    assert "workspace" in away.events
    back = safety.check(cmd(up), obs(), 0.0)
    assert "workspace" not in back.events
    assert tcp(back.command.arm_qpos_rad)[2] > home_tcp[2]


def test_gripper_is_kept_in_range_and_rate_limited():
    safety = joints_only(max_gripper_speed_m_s=0.1)
    first = safety.check(cmd(HOME, gripper=0.5), obs(gripper=0.04), 0.0)
    assert first.command.gripper_opening_m == pytest.approx(0.04 + 0.1 / HZ)
    assert first.events == ["gripper"]
    second = safety.check(cmd(HOME, gripper=-1.0), obs(gripper=0.04), PERIOD)
    assert second.command.gripper_opening_m == pytest.approx(0.04)  # from the last one sent
    unlimited = joints_only(max_gripper_speed_m_s=math.inf)
    assert unlimited.check(cmd(HOME, gripper=0.5), obs(), 0.0).command.gripper_opening_m == MAX_OPEN
    assert safety.counts["gripper"] == 2


# ---------------------------------------------------------------------------------- rejections
def test_jump_is_rejected_and_the_measured_pose_held():
    safety = layer(max_joint_jump_rad=0.5)
    measured = offset(1, 0.1)
    decision = safety.check(cmd(offset(0, 0.6)), obs(measured, gripper=0.03), 0.0)
    assert_held(decision, measured, "jump")
    assert decision.command.gripper_opening_m == 0.03  # nothing sent yet: the measured opening
    assert safety.counts["jump"] == 1
    # The rejected command is not re-sent when the next period brings none.
    assert_held(safety.check(None, obs(measured), PERIOD), measured, None)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["arm", "gripper"])
def test_non_finite_commands_are_rejected(bad, where):
    safety = layer()
    target = offset(2, 0.01)
    gripper = 0.04
    if where == "arm":
        target[2] = bad
    else:
        gripper = bad
    decision = safety.check(cmd(target, gripper), obs(), 0.0)
    assert_held(decision, HOME, "non_finite")
    assert decision.events == ["non_finite"] and safety.counts["non_finite"] == 1


def test_malformed_command_is_rejected():
    decision = layer().check(cmd(np.zeros(6)), obs(), 0.0)
    assert_held(decision, HOME, "malformed")


def test_disabled_layer_passes_through_but_rejects_non_finite():
    safety = layer(enabled=False)
    wild = offset(0, 2.0)
    passed = safety.check(cmd(wild, gripper=0.5), obs(stamp=-10.0), 0.0)
    assert not passed.held and passed.events == []
    np.testing.assert_array_equal(passed.command.arm_qpos_rad, wild)
    assert_held(safety.check(cmd(offset(0, math.nan)), obs(), 0.0), HOME, "non_finite")


# ---------------------------------------------------------------------------------- watchdog, stamps
def test_watchdog_holds_after_exactly_watchdog_periods():
    safety = joints_only(watchdog_periods=3)
    target = offset(0, 0.1)
    measured = HOME.copy()
    decision = safety.check(cmd(target), obs(measured), 0.0)
    for period in (1, 2):  # the last command is re-sent, re-checked against the new measurement
        measured = decision.command.arm_qpos_rad.copy()
        decision = safety.check(None, obs(measured, stamp=period * PERIOD), period * PERIOD)
        assert not decision.held and decision.events == ["joint_speed"]
        assert decision.command.arm_qpos_rad[0] == pytest.approx(HOME[0] + (period + 1) / HZ)
    measured = decision.command.arm_qpos_rad.copy()
    decision = safety.check(None, obs(measured, stamp=3 * PERIOD), 3 * PERIOD)
    assert_held(decision, measured, "watchdog")
    assert safety.counts["watchdog"] == 1
    assert not safety.check(cmd(target), obs(measured, stamp=4 * PERIOD), 4 * PERIOD).held


def test_watchdog_disabled_with_zero_periods():
    safety = joints_only(watchdog_periods=0)
    safety.check(cmd(offset(0, 0.01)), obs(), 0.0)
    for i in range(10):
        assert not safety.check(None, obs(stamp=i * PERIOD), i * PERIOD).held


def test_estop_latches_until_released():
    safety = layer()
    safety.press_estop("test")
    for i in range(50):
        decision = safety.check(cmd(offset(0, 0.01)), obs(stamp=i * PERIOD), i * PERIOD)
        assert_held(decision, HOME, "estop")
    assert safety.counts["estop"] == 50 and safety.estopped
    safety.release_estop()
    assert not safety.check(cmd(offset(0, 0.01)), obs(stamp=1.0), 1.0).held


def test_estop_input_and_robot_flag_latch():
    pressed = [False]
    safety = layer(enabled=False)
    safety.estop_input = lambda: pressed[0]
    assert not safety.check(cmd(HOME), obs(), 0.0).held
    pressed[0] = True
    assert safety.check(cmd(HOME), obs(), 0.0).held
    pressed[0] = False
    assert safety.check(cmd(HOME), obs(), 0.0).held  # latched
    other = layer()
    assert_held(other.check(cmd(HOME), obs(extras={"estop": True}), 0.0), HOME, "estop")
    assert other.check(cmd(HOME), obs(), 0.0).held


def test_stale_joint_state_and_stale_image_hold():
    safety = layer(max_joint_state_age_s=0.1, max_image_age_s=0.2)
    target = offset(0, 0.001)
    assert not safety.check(cmd(target), obs(stamp=1.0), 1.09).held
    assert_held(safety.check(cmd(target), obs(stamp=1.0), 1.15), HOME, "stale_joint_state")
    assert_held(safety.check(cmd(target), obs(stamp=math.nan), 1.0), HOME, "stale_joint_state")
    images = {"front": 1.0, "wrist": 0.7}
    assert_held(safety.check(cmd(target), obs(stamp=1.0, images=images), 1.0), HOME, "stale_image")
    assert not safety.check(cmd(target), obs(stamp=1.0, images={"front": 0.9}), 1.0).held
    assert safety.counts["stale_joint_state"] == 2 and safety.counts["stale_image"] == 1


def test_non_finite_measurement_latches_the_estop():
    safety = layer()
    with pytest.raises(RobotError):
        safety.check(cmd(HOME), obs(offset(0, math.nan)), 0.0)
    sent = safety.check(cmd(HOME), obs(), 0.0).command  # (estop latched: a hold of HOME)
    decision = safety.check(cmd(HOME), obs(offset(0, math.nan)), 0.0)
    assert decision.held and "invalid_joint_state" in decision.events
    np.testing.assert_array_equal(decision.command.arm_qpos_rad, sent.arm_qpos_rad)


# ---------------------------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"max_joint_speed_rad_s": -1.0}, "max_joint_speed_rad_s"),
        ({"max_ee_speed_m_s": 0.0}, "max_ee_speed_m_s"),
        ({"max_gripper_speed_m_s": math.nan}, "max_gripper_speed_m_s"),
        ({"max_joint_jump_rad": -0.1}, "max_joint_jump_rad"),
        ({"max_image_age_s": -1.0}, "max_image_age_s"),
        ({"joint_limit_margin_rad": -0.01}, "joint_limit_margin_rad"),
        ({"watchdog_periods": -1}, "watchdog_periods"),
        ({"watchdog_periods": 2.5}, "watchdog_periods"),
        ({"workspace_min_m": (0.5, 0.0, 0.0), "workspace_max_m": (0.4, 1.0, 1.0)}, "workspace_min_m"),
        ({"workspace_min_m": None}, "workspace_max_m"),
        ({"workspace_max_m": (1.0, 1.0)}, "workspace_max_m"),
    ],
)
def test_config_validation_names_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        SafetyConfig(**overrides).validate()


def test_margin_wider_than_a_joint_range_is_refused():
    with pytest.raises(ValueError, match="joint_limit_margin_rad"):
        SafetyLayer(SafetyConfig(joint_limit_margin_rad=2.0), HZ, kinematics=KIN)
    with pytest.raises(ValueError, match="control_hz"):
        SafetyLayer(SafetyConfig(), 0.0, kinematics=KIN)


def test_default_box_holds_the_simulated_tasks():
    low, high = np.asarray(SafetyConfig().workspace_min_m), np.asarray(SafetyConfig().workspace_max_m)
    for x in (OUTER_XY_LOW[0], OUTER_XY_HIGH[0]):
        for y in (OUTER_XY_LOW[1], OUTER_XY_HIGH[1]):
            for z in (CUBE_HALF_SIZE_M, *TARGET_HEIGHT_RANGE_M):
                assert np.all((low <= [x, y, z]) & ([x, y, z] <= high)), (x, y, z)
    assert np.all((low <= tcp(HOME)) & (tcp(HOME) <= high))


# ---------------------------------------------------------------------------------- properties
ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True, width=64)
PERIODS = 4


@st.composite
def measured_poses(draw) -> np.ndarray:
    if draw(st.booleans()):  # anywhere within the joint limits (TCP mostly outside the box)
        unit = draw(st.lists(st.floats(0.0, 1.0), min_size=7, max_size=7))
        return LOWER + np.asarray(unit) * (UPPER - LOWER)
    noise = draw(st.lists(st.floats(-0.4, 0.4), min_size=7, max_size=7))  # near home (inside)
    return np.clip(HOME + noise, LOWER, UPPER)


@st.composite
def commands(draw, measured: np.ndarray) -> JointCommand | None:
    kind = draw(st.sampled_from(["none", "near", "near", "near", "far", "wild"]))
    if kind == "none":
        return None
    if kind == "near":
        delta = draw(st.lists(st.floats(-0.2, 0.2), min_size=7, max_size=7))
    elif kind == "far":
        delta = draw(st.lists(st.floats(-10.0, 10.0), min_size=7, max_size=7))
    else:
        delta = draw(st.lists(ANY_FLOAT, min_size=7, max_size=7))
    with np.errstate(all="ignore"):
        target = measured + np.asarray(delta)
    gripper = draw(st.one_of(st.floats(-0.1, 0.2), ANY_FLOAT))
    return JointCommand(target, gripper, 0.0)


def box_excess(point: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    return float(np.linalg.norm(np.maximum(np.maximum(low - point, point - high), 0.0)))


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    control_hz=st.sampled_from([10.0, 20.0, 50.0]),
    watchdog=st.integers(0, 3),
)
def test_sent_command_is_always_within_limits(data, control_hz, watchdog):
    config = SafetyConfig(watchdog_periods=watchdog)
    safety = SafetyLayer(config, control_hz, kinematics=KIN)
    period = 1.0 / control_hz
    low, high = np.asarray(config.workspace_min_m), np.asarray(config.workspace_max_m)
    lo, hi = LOWER + config.joint_limit_margin_rad, UPPER - config.joint_limit_margin_rad
    for i in range(data.draw(st.integers(1, PERIODS))):
        measured = data.draw(measured_poses())
        now = i * period
        fresh = st.floats(-0.01, 0.1)
        age = data.draw(st.one_of(st.just(0.0), fresh, fresh, st.floats(0.0, 0.3), ANY_FLOAT))
        images = data.draw(st.dictionaries(st.sampled_from(["front", "wrist"]), st.floats(0.0, 0.25)))
        observation = obs(
            measured,
            gripper=data.draw(st.floats(0.0, MAX_OPEN)),
            stamp=now - age,
            images={name: now - a for name, a in images.items()},
        )
        decision = safety.check(data.draw(commands(measured)), observation, now)

        arm, gripper = decision.command.arm_qpos_rad, decision.command.gripper_opening_m
        assert np.isfinite(arm).all() and math.isfinite(gripper)
        assert 0.0 <= gripper <= MAX_OPEN
        assert np.all(np.abs(arm - measured) <= config.max_joint_speed_rad_s * period + 1e-12)
        inside = (measured >= lo) & (measured <= hi)
        assert np.all(~inside | ((arm >= lo - 1e-12) & (arm <= hi + 1e-12)))
        assert np.all((measured <= hi) | (arm <= measured))  # never further beyond a limit
        assert np.all((measured >= lo) | (arm >= measured))
        start, end = tcp(measured), tcp(arm)
        assert np.linalg.norm(end - start) <= config.max_ee_speed_m_s * period + 1e-9
        start_excess = box_excess(start, low, high)
        assert box_excess(end, low, high) <= start_excess + 1e-9  # inside stays inside
        if decision.held:
            np.testing.assert_array_equal(arm, measured)
