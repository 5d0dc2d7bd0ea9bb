"""Action labels of takeover commands: the normalised action that explains a joint target, checked
against the controllers it inverts (exactly for joint deltas and the gripper, within a measured
tolerance for the end-effector modes)."""

from __future__ import annotations

import numpy as np
import pytest
from vla_rl.real_world.action_labels import command_to_action, gripper_action, gripper_opening
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import JointCommand
from vla_rl.robots.controllers import ControllerSettings, make_controller
from vla_rl.robots.panda import PANDA

HOME = np.asarray(PANDA.home_arm_qpos, dtype=np.float64)
SETTINGS = ControllerSettings()


def controller_command(
    mode: str, action: np.ndarray, q: np.ndarray, kinematics: ArmKinematics
) -> JointCommand:
    """What the deployment loop sends for ``action`` at joints ``q`` (no safety layer)."""
    targets, _ = make_controller(mode, PANDA, SETTINGS)(action[None], kinematics.robot_state(q))
    return JointCommand(targets[0], gripper_opening(action[-1]))


def label_errors(mode: str, scale: float, kinematics: ArmKinematics, n: int = 100) -> np.ndarray:
    """|command_to_action(controller(a)) - a| [n, A] for actions uniform in [-scale, scale] at home."""
    rng = np.random.default_rng(0)
    dim = make_controller(mode, PANDA, SETTINGS).action_dim
    errors = []
    for _ in range(n):
        action = rng.uniform(-scale, scale, dim)
        command = controller_command(mode, action, HOME, kinematics)
        errors.append(np.abs(command_to_action(command, HOME, mode, kinematics, SETTINGS, PANDA) - action))
    return np.asarray(errors)


def test_gripper_label_inverts_gripper_command_exactly():
    actions = np.linspace(-1.0, 1.0, 9)
    openings = [gripper_opening(a) for a in actions]
    assert openings[0] == 0.0 and openings[-1] == pytest.approx(PANDA.gripper_max_opening_m)
    np.testing.assert_allclose([gripper_action(o) for o in openings], actions, atol=1e-12)
    assert gripper_action(1.0) == 1.0 and gripper_action(-0.5) == -1.0


def test_joint_delta_label_inverts_the_controller_exactly(kinematics):
    errors = label_errors("joint_delta", 1.0, kinematics)
    assert errors.max() < 1e-6  # float32 rounding only; targets stay inside the joint limits


# Measured over these 100 actions at the home pose (gripper pointing down), largest / median
# label error: ee_delta_pos 0.010 / 0.0016 (|a| <= 0.2) and 0.091 / 0.010 (|a| <= 1); ee_delta_pose
# 0.025 / 0.0021 and 0.373 / 0.029. It grows about quadratically with the step: the labels read
# the TCP motion of the IK solution, and one damped, linearised IK step does not land exactly on
# the action's target (worst for large combined rotations and translations). The gripper is exact.
@pytest.mark.parametrize(
    ("mode", "scale", "tolerance"),
    [
        ("ee_delta_pos", 0.2, 0.02),
        ("ee_delta_pos", 1.0, 0.15),
        ("ee_delta_pose", 0.2, 0.05),
        ("ee_delta_pose", 1.0, 0.45),
    ],
)
def test_end_effector_labels_invert_the_controller_within_tolerance(mode, scale, tolerance, kinematics):
    errors = label_errors(mode, scale, kinematics)
    assert errors[:, -1].max() < 1e-6
    assert errors.max() < tolerance
    assert np.median(errors) < tolerance / 4


def test_command_to_action_clips_and_rejects_unknown_modes(kinematics):
    far = JointCommand(HOME + 0.5, 1.0)
    action = command_to_action(far, HOME, "joint_delta", kinematics, SETTINGS, PANDA)
    np.testing.assert_array_equal(action, np.ones(8, np.float32))
    with pytest.raises(ValueError, match="joint_delta"):
        command_to_action(far, HOME, "torque", kinematics, SETTINGS, PANDA)
