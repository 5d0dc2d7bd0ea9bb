"""The torch controllers and rotation helpers reproduce the numpy ones (``vla_rl.robots.controllers``)."""

import dataclasses

import numpy as np
import pytest
import torch
from vla_rl.robots import rotations, torch_rotations
from vla_rl.robots.controllers import (
    CONTROLLERS,
    POINTING_DOWN,
    ControllerSettings,
    RobotState,
    make_controller,
)
from vla_rl.robots.panda import PANDA
from vla_rl.robots.torch_controllers import (
    TORCH_CONTROLLERS,
    TorchRobotState,
    damped_least_squares,
    gripper_command,
    make_torch_controller,
    pointing_down,
)
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

from vla_rl.envs.config import EnvConfig

MODES = sorted(CONTROLLERS)
TIGHT = {"rtol": 1e-10, "atol": 1e-10}
LOOSE_FLOAT32 = {"rtol": 1e-4, "atol": 1e-4}
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
    ),
]


def _random_rotations(rng: np.random.Generator, n: int) -> np.ndarray:
    """[n + 4, 3, 3]: random rotations plus identity, pointing down, and two within 1e-7 rad of pi."""
    axes = rng.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    random = rotations.axis_angle_to_matrix(axes * rng.uniform(0.0, np.pi, size=(n, 1)))
    near_pi = rotations.axis_angle_to_matrix(
        np.array([[np.pi - 1e-9, 0, 0], [0, 0.6, 0.8]]) * [[1], [np.pi - 1e-7]]
    )
    return np.concatenate([random, np.eye(3)[None], POINTING_DOWN[None], near_pi])


def _random_robot_state(seed: int, n: int = 60) -> RobotState:
    """Seeded plausible states: joints within limits, proper rotations, Jacobian-sized random matrices."""
    rng = np.random.default_rng(seed)
    xmat = _random_rotations(rng, n - 4)
    return RobotState(
        arm_qpos=rng.uniform(PANDA.arm_lower, PANDA.arm_upper, size=(n, 7)),
        tcp_pos=rng.uniform([0.2, -0.4, 0.0], [0.8, 0.4, 0.6], size=(n, 3)),
        tcp_xmat=xmat,
        tcp_jacobian=rng.normal(scale=0.4, size=(n, 6, 7)),
    )


def _copy_state(state: RobotState) -> RobotState:
    return RobotState(*(np.array(getattr(state, f.name)) for f in dataclasses.fields(RobotState)))


def _concat_states(states: list[RobotState]) -> RobotState:
    return RobotState(
        *(np.concatenate([getattr(s, f.name) for s in states]) for f in dataclasses.fields(RobotState))
    )


@pytest.fixture(scope="module")
def real_state() -> RobotState:
    """Robot states of 4 MuJoCo worlds after a reset and after each of 5 random ee_delta_pose steps."""
    env = MujocoBatchedEnv(EnvConfig(task="lift", num_envs=4, cameras=[], control_mode="ee_delta_pose"))
    env.reset(seed=3)
    gen = torch.Generator().manual_seed(0)
    states = [_copy_state(env._robot_state())]
    for _ in range(5):
        env.step(torch.rand(4, env.action_dim, generator=gen) * 2 - 1)
        states.append(_copy_state(env._robot_state()))
    env.close()
    return _concat_states(states)


def _actions(seed: int, n: int, dim: int) -> np.ndarray:
    """Actions mostly in [-1, 1], some beyond (clipped by the controllers), some exactly 0 and +-1."""
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1.5, 1.5, size=(n, dim))
    actions[:3] = [[0.0] * dim, [1.0] * dim, [-1.0] * dim]
    return actions


def _compare(mode: str, state: RobotState, seed: int, dtype: torch.dtype, device: str, tol: dict) -> None:
    numpy_controller, torch_controller = make_controller(mode, PANDA), make_torch_controller(mode, PANDA)
    actions = _actions(seed, len(state.arm_qpos), numpy_controller.action_dim)
    expected_arm, expected_finger = numpy_controller(actions, state)
    arm, finger = torch_controller(
        torch.as_tensor(actions, dtype=dtype, device=device), TorchRobotState.from_numpy(state, device, dtype)
    )
    assert arm.dtype == finger.dtype == dtype and arm.device.type == finger.device.type == device
    assert arm.shape == (len(actions), 7) and finger.shape == (len(actions),)
    torch.testing.assert_close(arm.cpu(), torch.from_numpy(expected_arm).to(dtype), **tol)
    torch.testing.assert_close(finger.cpu(), torch.from_numpy(expected_finger).to(dtype), **tol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
def test_matches_numpy_on_random_states_float64(mode, device):
    for seed in range(3):
        _compare(mode, _random_robot_state(seed), seed, torch.float64, device, TIGHT)


@pytest.mark.parametrize("mode", MODES)
def test_matches_numpy_on_real_states_float64(mode, real_state):
    _compare(mode, real_state, 7, torch.float64, "cpu", TIGHT)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", MODES)
def test_matches_numpy_in_float32(mode, device, real_state):
    _compare(mode, real_state, 11, torch.float32, device, LOOSE_FLOAT32)
    _compare(mode, _random_robot_state(5), 5, torch.float32, device, LOOSE_FLOAT32)


def test_float32_action_is_cast_to_the_state_dtype():
    state = _random_robot_state(1, n=8)
    action = torch.zeros(8, 4, dtype=torch.float32)
    arm, finger = make_torch_controller("ee_delta_pos", PANDA)(action, TorchRobotState.from_numpy(state))
    assert arm.dtype == finger.dtype == torch.float64


def test_joint_delta_by_hand():
    # Home + 0.5 * 0.1 rad on joint 1; joint 4 pushed past its upper limit (-0.0698) is clipped;
    # gripper -1 -> closed (0 m), 0 -> a quarter of 8 cm, 2 (clipped to 1) -> one finger fully open.
    home = torch.tensor(PANDA.home_arm_qpos, dtype=torch.float64)
    state = TorchRobotState(
        arm_qpos=torch.stack([home, home, home]).clone(),
        tcp_pos=torch.zeros(3, 3, dtype=torch.float64),
        tcp_xmat=torch.eye(3, dtype=torch.float64).expand(3, 3, 3),
        tcp_jacobian=torch.zeros(3, 6, 7, dtype=torch.float64),
    )
    state.arm_qpos[1, 3] = -0.1
    action = torch.zeros(3, 8, dtype=torch.float64)
    action[0, 0], action[1, 3] = 0.5, 1.0
    action[:, 7] = torch.tensor([-1.0, 0.0, 2.0])
    arm, finger = make_torch_controller("joint_delta", PANDA)(action, state)
    assert arm[0, 0].item() == pytest.approx(0.05, abs=1e-15)
    assert arm[1, 3].item() == pytest.approx(-0.0698, abs=1e-15)
    torch.testing.assert_close(arm[2], home)
    torch.testing.assert_close(finger, torch.tensor([0.0, 0.02, 0.04], dtype=torch.float64))


def test_ee_delta_pos_by_hand():
    # J = [I6 | 0], at home pointing down: the null-space pull and the orientation error are 0, so
    # dq = J^T (I + 0.05^2 I)^-1 e with e = (0.025, 0, 0, 0, 0, 0) moves joint 1 by 0.025 / 1.0025.
    home = torch.tensor(PANDA.home_arm_qpos, dtype=torch.float64)
    jacobian = torch.zeros(1, 6, 7, dtype=torch.float64)
    jacobian[0, :, :6] = torch.eye(6)
    state = TorchRobotState(
        arm_qpos=home[None].clone(),
        tcp_pos=torch.zeros(1, 3, dtype=torch.float64),
        tcp_xmat=torch.from_numpy(POINTING_DOWN)[None].clone(),
        tcp_jacobian=jacobian,
    )
    arm, finger = make_torch_controller("ee_delta_pos", PANDA)(torch.tensor([[1.0, 0.0, 0.0, 1.0]]), state)
    expected = home.clone()
    expected[0] += 0.025 / 1.0025
    torch.testing.assert_close(arm[0], expected, rtol=0, atol=1e-15)
    assert finger.item() == pytest.approx(0.04)


def test_orientation_error_is_capped():
    # Identity TCP vs pointing down: a pi rotation about x, capped to max_orientation_correction_rad.
    eye = torch.eye(3, dtype=torch.float64)[None]
    error = torch_rotations.orientation_error(pointing_down(torch.device("cpu"), torch.float64)[None], eye)
    torch.testing.assert_close(error.abs(), torch.tensor([[np.pi, 0.0, 0.0]], dtype=torch.float64))


def test_dls_by_hand():
    # As the numpy test: J = diag(1, 2), lambda = 0.5, e = (1, 1) -> dq = (0.8, 2 / 4.25).
    jac = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]], dtype=torch.float64)
    dq = damped_least_squares(jac, torch.tensor([[1.0, 1.0]], dtype=torch.float64), damping=0.5)
    torch.testing.assert_close(dq, torch.tensor([[0.8, 2.0 / 4.25]], dtype=torch.float64), rtol=1e-12, atol=0)


def test_gripper_command_by_hand():
    command = gripper_command(torch.tensor([-1.0, 0.0, 1.0, 3.0], dtype=torch.float64), PANDA)
    torch.testing.assert_close(command, torch.tensor([0.0, 0.02, 0.04, 0.04], dtype=torch.float64))


@pytest.mark.parametrize("device", DEVICES)
def test_rotation_helpers_match_numpy(device):
    rng = np.random.default_rng(4)
    mats = _random_rotations(rng, 200)
    rotvecs = rotations.matrix_to_axis_angle(mats)
    torch_mats = torch.from_numpy(mats).to(device)
    torch.testing.assert_close(
        torch_rotations.matrix_to_axis_angle(torch_mats).cpu(), torch.from_numpy(rotvecs), **TIGHT
    )
    back = torch_rotations.axis_angle_to_matrix(torch.from_numpy(rotvecs).to(device))
    torch.testing.assert_close(back.cpu(), torch.from_numpy(rotations.axis_angle_to_matrix(rotvecs)), **TIGHT)
    current = torch.from_numpy(mats[::-1].copy()).to(device)
    torch.testing.assert_close(
        torch_rotations.orientation_error(torch_mats, current).cpu(),
        torch.from_numpy(rotations.orientation_error(mats, mats[::-1])),
        rtol=1e-7,
        atol=1e-7,  # near pi the angle is arccos of a cosine near -1: matmul rounding is amplified
    )


def test_registry_matches_numpy_and_rejects_unknown_modes():
    assert TORCH_CONTROLLERS.keys() == CONTROLLERS.keys()
    for mode, cls in TORCH_CONTROLLERS.items():
        assert cls.action_dim == CONTROLLERS[mode].action_dim
    settings = ControllerSettings(max_ee_step_m=0.01)
    assert make_torch_controller("ee_delta_pos", PANDA, settings).settings is settings
    with pytest.raises(ValueError, match="unknown control_mode"):
        make_torch_controller("teleport", PANDA)


def test_constants_are_cached_per_device_and_dtype():
    cpu = torch.device("cpu")
    assert pointing_down(cpu, torch.float64) is pointing_down(cpu, torch.float64)
    assert pointing_down(cpu, torch.float32).dtype == torch.float32
    controller = make_torch_controller("ee_delta_pos", PANDA)
    like = torch.zeros(1, dtype=torch.float32)
    assert controller.robot_constants(like)[0] is controller.robot_constants(like)[0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
@pytest.mark.parametrize("mode", MODES)
def test_controllers_do_not_synchronise_with_the_host(mode):
    state = TorchRobotState.from_numpy(_random_robot_state(2), "cuda", torch.float32)
    controller = make_torch_controller(mode, PANDA)
    action = torch.zeros(len(state.arm_qpos), controller.action_dim, device="cuda")
    controller(action, state)  # builds the cached constants (a host-to-device copy) once
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        controller(action, state)
    finally:
        torch.cuda.set_sync_debug_mode("default")
