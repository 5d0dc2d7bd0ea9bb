import numpy as np
import pytest
import torch
from vla_rl.robots.controllers import (
    CONTROLLERS,
    ControllerSettings,
    RobotState,
    damped_least_squares,
    gripper_command,
    make_controller,
)
from vla_rl.robots.panda import PANDA
from vla_rl.robots.rotations import axis_angle_to_matrix, matrix_to_axis_angle
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv
from vla_rl.sims.mujoco.observations import PROPRIO_FIELDS, split_fields

from vla_rl.envs.config import EnvConfig


def test_dls_matches_hand_worked_diagonal_example():
    # J = diag(1, 2), lambda = 0.5: J J^T + l^2 I = diag(1.25, 4.25); e = (1, 1)
    # -> (J J^T + l^2 I)^-1 e = (0.8, 0.235294...) -> J^T of that = (0.8, 0.470588...).
    jac = np.array([[[1.0, 0.0], [0.0, 2.0]]])
    dq = damped_least_squares(jac, np.array([[1.0, 1.0]]), damping=0.5)
    np.testing.assert_allclose(dq, [[0.8, 2.0 / 4.25]], rtol=1e-12)


def test_dls_without_damping_inverts_a_square_jacobian():
    # J = [[1, 1], [0, 1]] has inverse [[1, -1], [0, 1]]: e = (1, 1) -> dq = (0, 1).
    jac = np.array([[[1.0, 1.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 4.0]]])
    dq = damped_least_squares(jac, np.array([[1.0, 1.0], [1.0, 1.0]]), damping=0.0)
    np.testing.assert_allclose(dq, [[0.0, 1.0], [0.5, 0.25]], atol=1e-12)


def test_gripper_command_maps_minus_one_to_closed_and_one_to_open():
    np.testing.assert_allclose(
        gripper_command(np.array([-1.0, 0.0, 1.0, 3.0]), PANDA), [0.0, 0.02, 0.04, 0.04]
    )


def test_axis_angle_round_trip_including_near_pi():
    rotvecs = np.array([[0.0, 0.0, 0.0], [0.3, -0.2, 0.1], [0.0, 0.0, np.pi - 1e-9], [1.0, 1.0, 0.0]])
    rotvecs[3] *= (np.pi - 1e-7) / np.linalg.norm(rotvecs[3])
    back = matrix_to_axis_angle(axis_angle_to_matrix(rotvecs))
    np.testing.assert_allclose(axis_angle_to_matrix(back), axis_angle_to_matrix(rotvecs), atol=1e-6)
    np.testing.assert_allclose(back[:2], rotvecs[:2], atol=1e-12)
    # 90 degrees about z by hand: x -> y.
    np.testing.assert_allclose(
        axis_angle_to_matrix(np.array([[0, 0, np.pi / 2]]))[0] @ [1, 0, 0], [0, 1, 0], atol=1e-12
    )


def test_unknown_control_mode_is_rejected_with_allowed_names():
    with pytest.raises(ValueError, match="joint_delta"):
        make_controller("torque", PANDA)


def test_joint_targets_are_clipped_to_limits():
    controller = make_controller("joint_delta", PANDA, ControllerSettings(max_joint_step_rad=0.5))
    at_upper = PANDA.arm_upper[None].copy()
    state = RobotState(at_upper, np.zeros((1, 3)), np.eye(3)[None], np.zeros((1, 6, 7)))
    targets, _ = controller(np.ones((1, 8)), state)
    np.testing.assert_array_equal(targets, at_upper)
    at_lower = RobotState(PANDA.arm_lower[None].copy(), state.tcp_pos, state.tcp_xmat, state.tcp_jacobian)
    targets, _ = controller(-np.ones((1, 8)), at_lower)
    np.testing.assert_array_equal(targets, PANDA.arm_lower[None])


def _tcp(obs):
    return split_fields(obs["proprio"].numpy().astype(np.float64), PROPRIO_FIELDS)["tcp_pos"]


def test_ik_drives_tcp_to_target_within_a_few_steps_and_keeps_pointing_down():
    env = MujocoBatchedEnv(EnvConfig(task="reach", num_envs=4, control_mode="ee_delta_pos", num_threads=1))
    obs, _ = env.reset(seed=3)
    offsets = np.array([[0.06, -0.05, -0.08], [-0.08, 0.06, 0.05], [0.0, 0.1, -0.1], [0.05, 0.05, 0.0]])
    target = _tcp(obs) + offsets
    step_m = env.controller.settings.max_ee_step_m
    for _ in range(10):
        action = np.concatenate([np.clip((target - _tcp(obs)) / step_m, -1, 1), np.ones((4, 1))], axis=1)
        obs = env.step(torch.from_numpy(action).float()).obs
    assert np.linalg.norm(target - _tcp(obs), axis=1).max() < 0.01
    rot6 = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)["tcp_rot6"]
    np.testing.assert_allclose(rot6[:, :3], np.tile([1, 0, 0], (4, 1)), atol=0.02)  # tool x stays world x
    np.testing.assert_allclose(rot6[:, 3:], np.tile([0, -1, 0], (4, 1)), atol=0.02)
    env.close()


def test_ee_delta_pose_rotates_about_world_z():
    env = MujocoBatchedEnv(EnvConfig(task="reach", num_envs=2, control_mode="ee_delta_pose", num_threads=1))
    obs, _ = env.reset(seed=0)
    action = torch.zeros(2, 7)
    action[:, 5] = 1.0
    for _ in range(3):
        obs = env.step(action).obs
    for _ in range(5):
        obs = env.step(torch.zeros(2, 7)).obs
    tool_x = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)["tcp_rot6"][:, :3]
    yaw = np.arctan2(tool_x[:, 1], tool_x[:, 0])
    np.testing.assert_allclose(yaw, 3 * env.controller.settings.max_ee_rot_rad, atol=0.05)
    env.close()


def test_joint_delta_keeps_joints_within_limits():
    env = MujocoBatchedEnv(EnvConfig(task="reach", num_envs=2, control_mode="joint_delta", num_threads=1))
    env.reset(seed=0)
    action = torch.tensor([[1.0] * 8, [-1.0] * 8])
    for _ in range(40):
        obs = env.step(action).obs
    qpos = split_fields(obs["proprio"].numpy(), PROPRIO_FIELDS)["arm_qpos"]
    assert np.all(qpos >= PANDA.arm_lower - 0.02) and np.all(qpos <= PANDA.arm_upper + 0.02)
    env.close()


def test_registry_action_dims():
    assert {name: cls.action_dim for name, cls in CONTROLLERS.items()} == {
        "joint_delta": 8,
        "ee_delta_pos": 4,
        "ee_delta_pose": 7,
    }
