"""A robot behind the safety layer: what ``build_robot`` returns, so nothing reaches an arm unchecked.

The transports (``Ros1Robot``, ``Ros2Robot``) send what they are given; ``SafeRobot`` wraps one so
that every ``send_action`` is checked against the latest observation first and the command actually
sent comes back. The deployment loop calls ``apply`` instead, which also takes "no fresh command this
period" (``None``: the watchdog counts it) and returns the whole decision (held or not, events).
"""

from __future__ import annotations

from vla_rl.real_world.recording import InterventionInput
from vla_rl.real_world.robot import Feature, JointCommand, Robot, RobotObservation
from vla_rl.real_world.safety import SafetyDecision, SafetyLayer


class SafeRobot(Robot):
    """``robot`` with every command passed through ``safety`` (see the module docstring)."""

    def __init__(self, robot: Robot, safety: SafetyLayer) -> None:
        self.robot = robot
        self.safety = safety

    @property
    def observation_features(self) -> dict[str, Feature]:
        return self.robot.observation_features

    @property
    def action_features(self) -> dict[str, Feature]:
        return self.robot.action_features

    @property
    def is_connected(self) -> bool:
        return self.robot.is_connected

    def connect(self) -> None:
        self.robot.connect()

    def disconnect(self) -> None:
        self.robot.disconnect()

    def get_observation(self) -> RobotObservation:
        return self.robot.get_observation()

    def wait_for_new_observation(self, after_stamp_s: float, timeout_s: float) -> bool:
        return self.robot.wait_for_new_observation(after_stamp_s, timeout_s)

    def now_s(self) -> float:
        return self.robot.now_s()

    def teleop_input(self) -> InterventionInput | None:
        return self.robot.teleop_input()

    def apply(
        self, command: JointCommand | None, observation: RobotObservation | None = None
    ) -> SafetyDecision:
        """Check ``command`` (None: none arrived this period) against ``observation`` (default: the
        latest), send what passes, and return the decision with the command as sent. The command
        keeps its stamp; a hold is stamped with the observation it holds."""
        obs = observation if observation is not None else self.robot.get_observation()
        decision = self.safety.check(command, obs, self.robot.now_s())
        decision.command.stamp_s = command.stamp_s if command is not None else obs.joint_state_stamp_s
        sent = self.robot.send_action(decision.command)
        return SafetyDecision(sent, decision.held, decision.events)

    def send_action(self, command: JointCommand) -> JointCommand:
        return self.apply(command).command
