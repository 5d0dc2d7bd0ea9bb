"""The simulated robot in this process, as a ``Robot``: deployment without any transport.

``send_action`` steps the world one control period (lockstep), so a deployment through it takes
exactly the steps direct evaluation takes: the reference the transports are compared with, and a
fast way to test the deployment loop (policy server failures, safety, recording) without ROS.
"""

from __future__ import annotations

import itertools
import time

from vla_rl.real_world.robot import (
    Feature,
    JointCommand,
    Robot,
    RobotError,
    RobotObservation,
    command_features,
    robot_features,
)
from vla_rl.real_world.sim_control import SimStatus
from vla_rl.real_world.sim_robot import SimSnapshot, SimulatedRobot

from vla_rl.envs.config import EnvConfig


class LocalSimRobot(Robot):
    """A ``SimulatedRobot`` behind the robot interface; stamps count control periods (s)."""

    def __init__(self, env_cfg: EnvConfig, realtime: bool = False) -> None:
        self.env_cfg = env_cfg
        self.realtime = realtime
        """True: the world advances one period per wall-clock period (when the caller waits for the
        next observation), whatever the commands, like a robot; False: one period per command."""
        self._next_tick_s = 0.0
        self.sim: SimulatedRobot | None = None
        self.sent: list[JointCommand] = []
        """Every command sent, in order."""
        self.measured_at_send: list = []
        """The arm's joint angles [7] when each command was sent."""
        self._ticks = itertools.count(1)
        self._stamp_s = 0.0

    @property
    def observation_features(self) -> dict[str, Feature]:
        size = self.env_cfg.image_size
        return robot_features(self.env_cfg.cameras, (size, size))

    @property
    def action_features(self) -> dict[str, Feature]:
        return command_features()

    @property
    def is_connected(self) -> bool:
        return self.sim is not None

    def connect(self) -> None:
        if self.sim is None:
            self.sim = SimulatedRobot(self.env_cfg)
            self._tick()

    def disconnect(self) -> None:
        if self.sim is not None:
            self.sim.close()
            self.sim = None

    def _tick(self) -> None:
        period_s = 1.0 / self._require().control_hz
        self._stamp_s = next(self._ticks) * period_s
        self._next_tick_s = time.monotonic() + period_s

    def _require(self) -> SimulatedRobot:
        if self.sim is None:
            raise RobotError("the simulated robot is not connected")
        return self.sim

    def now_s(self) -> float:
        """Simulated time: the current period's stamp (a lockstep robot never lags)."""
        return self._stamp_s

    def wait_for_new_observation(self, after_stamp_s: float, timeout_s: float) -> bool:
        if self.realtime and self._stamp_s <= after_stamp_s:
            time.sleep(max(0.0, self._next_tick_s - time.monotonic()))
            self._require().step()
            self._tick()
        return self._stamp_s > after_stamp_s

    def get_observation(self) -> RobotObservation:
        snap: SimSnapshot = self._require().last
        return RobotObservation(
            arm_qpos_rad=snap.arm_qpos_rad,
            arm_qvel_rad_s=snap.arm_qvel_rad_s,
            gripper_opening_m=snap.gripper_opening_m,
            joint_state_stamp_s=self._stamp_s,
            images=dict(snap.images),
            image_stamps_s={camera: self._stamp_s for camera in snap.images},
            task_state=snap.task_state,
        )

    def send_action(self, command: JointCommand) -> JointCommand:
        sim = self._require()
        self.measured_at_send.append(sim.last.arm_qpos_rad.copy())
        sim.set_targets(command.arm_qpos_rad, command.gripper_opening_m)
        if not self.realtime:
            sim.step()
            self._tick()
        self.sent.append(command.copy())
        return command

    def status(self) -> SimStatus:
        snap = self._require().last
        return SimStatus(snap.episode, snap.step, float(snap.success), float(snap.done), 0.0, self._stamp_s)


class LocalSimControl:
    """``SimControl`` of a ``LocalSimRobot``."""

    def __init__(self, robot: LocalSimRobot) -> None:
        self.robot = robot

    def reset(self, seed: int, timeout_s: float = 10.0) -> SimStatus:
        self.robot._require().reset(seed)
        self.robot._tick()
        return self.robot.status()

    def status_at(self, stamp_s: float, timeout_s: float) -> SimStatus | None:
        status = self.robot.status()
        return status if status.stamp_s == stamp_s else None

    def close(self) -> None:
        pass
