"""A person's takeover from a SpaceMouse or a gamepad, read through Linux's input layer (``evdev``;
``pip install 'vla-rl[takeover]'``), for ``intervention.kind: device`` of ``vla-rl learn-online``.

While ``hold_key`` is held down the person drives: each period the configured axes (a SpaceMouse's
translation, a gamepad's sticks), scaled to [-1, 1] by the device's own ranges, move the TCP by up to
``max_ee_step_m`` along x, y and z, and ``gripper_key`` toggles the gripper. The motion becomes a
joint target through the simulator's ``ee_delta_pos`` controller from the measured pose; the
actor sends it through the safety layer and records it with the intervention flag, as any takeover.
Releasing ``hold_key`` hands the arm back to the policy. Events are read on a background thread, so
the control loop never waits on the device.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from vla_rl.real_world.action_labels import gripper_opening
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.online_config import TakeoverDeviceSection
from vla_rl.real_world.robot import InterventionInput, JointCommand, RobotObservation
from vla_rl.robots.controllers import ControllerSettings, make_controller
from vla_rl.robots.panda import PANDA

from vla_rl.config import ConfigError
from vla_rl.envs.config import EnvConfig

EXTRA_HINT = "the takeover device needs evdev: pip install 'vla-rl[takeover]'"


def import_evdev() -> Any:  # noqa: ANN401 - the evdev module
    try:
        import evdev
    except ImportError as error:
        raise ConfigError(f"config key 'intervention.kind': {EXTRA_HINT}") from error
    return evdev


class DeviceTakeover(InterventionInput):
    """See the module docstring. ``device``: an ``evdev.InputDevice`` (default: opened at
    ``settings.path``); ``read_events=False`` leaves feeding :meth:`handle` to the caller."""

    def __init__(
        self,
        settings: TakeoverDeviceSection,
        device: Any = None,  # noqa: ANN401 - evdev.InputDevice
        read_events: bool = True,
    ) -> None:
        evdev = import_evdev()
        self.ecodes = evdev.ecodes
        self.settings = settings
        self.device = device if device is not None else evdev.InputDevice(settings.path)
        self.hold_code = self._code(settings.hold_key, "takeover_device.hold_key")
        self.gripper_code = self._code(settings.gripper_key, "takeover_device.gripper_key")
        self.axis_codes = [self._code(name, "takeover_device.axes") for name in settings.axes]
        self.ranges = {code: self._range(code) for code in self.axis_codes}
        self.controller_settings = ControllerSettings(max_ee_step_m=settings.max_ee_step_m)
        self.controller = make_controller("ee_delta_pos", PANDA, self.controller_settings)
        self.kinematics = ArmKinematics()
        self._lock = threading.Lock()
        self.held = False
        self.gripper_closed = False
        self.axes = dict.fromkeys(self.axis_codes, 0.0)
        self._observation: RobotObservation | None = None
        if read_events:
            threading.Thread(target=self._read, name="takeover-device", daemon=True).start()

    def _code(self, name: str, key: str) -> int:
        code = self.ecodes.ecodes.get(name)
        if code is None:
            raise ConfigError(f"config key '{key}': {name!r} is no evdev key or axis name")
        return int(code)

    def _range(self, code: int) -> tuple[float, float]:
        """(centre, half width) of an axis, from the device (a SpaceMouse: about -350..350)."""
        info = self.device.absinfo(code)
        return (info.max + info.min) / 2.0, max((info.max - info.min) / 2.0, 1.0)

    def _read(self) -> None:
        for event in self.device.read_loop():
            self.handle(event)

    def handle(self, event: Any) -> None:  # noqa: ANN401 - evdev.InputEvent
        """Take one input event into the device's state."""
        with self._lock:
            if event.type == self.ecodes.EV_KEY and event.code == self.hold_code:
                self.held = event.value != 0
            elif event.type == self.ecodes.EV_KEY and event.code == self.gripper_code and event.value == 1:
                self.gripper_closed = not self.gripper_closed
            elif event.type == self.ecodes.EV_ABS and event.code in self.ranges:
                centre, half = self.ranges[event.code]
                self.axes[event.code] = float(np.clip((event.value - centre) / half, -1.0, 1.0))

    def observe(self, observation: RobotObservation, proposed: JointCommand | None) -> None:
        self._observation = observation

    def action(self) -> np.ndarray | None:
        """The person's ``ee_delta_pos`` action [4] while they hold the key, else None."""
        with self._lock:
            if not self.held:
                return None
            motion = [self.axes[code] for code in self.axis_codes] + [0.0] * (3 - len(self.axis_codes))
            return np.array([*motion[:3], -1.0 if self.gripper_closed else 1.0], np.float32)

    def poll(self) -> JointCommand | None:
        action = self.action()
        if action is None or self._observation is None:
            return None
        obs = self._observation
        arm, _ = self.controller(
            action[None].astype(np.float64), self.kinematics.robot_state(obs.arm_qpos_rad)
        )
        return JointCommand(arm[0], gripper_opening(float(action[-1])), obs.joint_state_stamp_s)


def device_takeover(settings: TakeoverDeviceSection, env: EnvConfig) -> DeviceTakeover:
    """The configured device as an intervention input (``env`` is the policy's; the device always
    drives the TCP, whatever the policy's control mode: its steps are labelled in the policy's units)."""
    return DeviceTakeover(settings)
