"""The evdev takeover input: real ``evdev`` events move the TCP while the hold key is down, the
gripper key toggles, releasing hands back. A device made with ``UInput`` needs ``/dev/uinput``."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.online_config import TakeoverDeviceSection
from vla_rl.real_world.robot import RobotObservation
from vla_rl.robots.panda import PANDA

evdev = pytest.importorskip("evdev", reason="evdev is not installed: pip install 'vla-rl[takeover]'")


@dataclass
class AbsInfo:
    min: int
    max: int


class StillDevice:
    """Only the axis ranges (a SpaceMouse's -350..350); events come from the test."""

    def absinfo(self, code: int) -> AbsInfo:
        return AbsInfo(-350, 350)


def event(kind: int, code: int, value: int):  # noqa: ANN201
    return evdev.InputEvent(0, 0, kind, code, value)


def test_axes_drive_the_tcp_while_the_hold_key_is_down() -> None:
    from vla_rl.real_world.takeover_device import DeviceTakeover

    e = evdev.ecodes
    settings = TakeoverDeviceSection(max_ee_step_m=0.01)
    takeover = DeviceTakeover(settings, device=StillDevice(), read_events=False)
    q = np.array(PANDA.home_arm_qpos)
    takeover.observe(RobotObservation(q, np.zeros(7), 0.08, 1.0), None)
    takeover.handle(event(e.EV_ABS, e.ABS_X, 350))
    assert takeover.poll() is None  # not held: the policy drives
    takeover.handle(event(e.EV_KEY, e.BTN_0, 1))
    takeover.handle(event(e.EV_KEY, e.BTN_1, 1))
    np.testing.assert_allclose(takeover.action(), [1.0, 0.0, 0.0, -1.0])
    command = takeover.poll()
    kin = ArmKinematics()
    moved = kin.tcp_pose(command.arm_qpos_rad)[0] - kin.tcp_pose(q)[0]
    assert abs(moved[0] - 0.01) < 2e-3 and np.max(np.abs(moved[1:])) < 2e-3  # 1 cm along x
    assert command.gripper_opening_m == pytest.approx(0.0)  # toggled closed
    takeover.handle(event(e.EV_KEY, e.BTN_0, 0))
    assert takeover.poll() is None


@pytest.mark.skipif(not os.access("/dev/uinput", os.W_OK), reason="no writable /dev/uinput to make a device")
def test_a_virtual_device_is_read_in_the_background() -> None:
    import time

    from vla_rl.real_world.takeover_device import DeviceTakeover

    e = evdev.ecodes
    caps = {
        e.EV_KEY: [e.BTN_0, e.BTN_1],
        e.EV_ABS: [(c, evdev.AbsInfo(0, -350, 350, 0, 0, 0)) for c in (0, 1, 2)],
    }
    with evdev.UInput(caps, name="vla-rl-test") as ui:
        time.sleep(0.2)
        takeover = DeviceTakeover(TakeoverDeviceSection(path=ui.device.path))
        ui.write(e.EV_KEY, e.BTN_0, 1)
        ui.write(e.EV_ABS, e.ABS_Z, -350)
        ui.syn()
        deadline = time.monotonic() + 2.0
        while takeover.action() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        np.testing.assert_allclose(takeover.action(), [0.0, 0.0, -1.0, 1.0])
