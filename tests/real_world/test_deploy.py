"""The deployment loop without a transport (``LocalSimRobot``): observation building, command
mapping, safety, a policy server that dies, recording and interventions."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from lagging_robot import LaggingCameras
from success_models import tiny_classifier
from vla_rl.real_world.deploy import Deployment
from vla_rl.real_world.deploy_config import (
    DeployConfig,
    RecordingSection,
    SuccessSection,
    compose_deploy_config,
    deployment_env,
)
from vla_rl.real_world.local_sim import LocalSimControl, LocalSimRobot
from vla_rl.real_world.policy_client import PolicyClient
from vla_rl.real_world.policy_runner import load_trained_policy
from vla_rl.real_world.recording import ScriptedIntervention
from vla_rl.real_world.robot import JointCommand
from vla_rl.real_world.safety_config import SafetyConfig
from vla_rl.real_world.sim_eval import evaluate_on_seeds
from vla_rl.real_world.transports import build_robot

from vla_rl.config import ConfigError
from vla_rl.envs.config import EnvConfig

EPISODES = 8


def _deploy(cfg: DeployConfig, loaded, infer=None, robot=None, **kwargs):  # noqa: ANN001, ANN202
    robot = robot or LocalSimRobot(loaded.env)
    with robot:
        deployment = Deployment(
            cfg,
            loaded.env,
            loaded.obs_keys,
            robot,
            infer or loaded.infer,
            sim=LocalSimControl(robot),
            **kwargs,
        )
        return deployment.run(), robot


def test_deploy_config_is_validated_before_anything_runs() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'safety.max_speed'"):
        compose_deploy_config(["safety.max_speed=1"])
    with pytest.raises(ConfigError, match="'action_queue.merge'"):
        compose_deploy_config(["action_queue.merge=median"])
    with pytest.raises(ConfigError, match="max_ee_speed_m_s"):
        compose_deploy_config(["safety.max_ee_speed_m_s=-1"])
    with pytest.raises(ConfigError, match="'max_steps'.*real robot"):
        compose_deploy_config(["robot.simulated=false"])


def test_the_policy_server_refuses_a_public_address_without_a_token(reach_run: Path, capsys) -> None:  # noqa: ANN001
    from vla_rl.cli import EXIT_CONFIG_ERROR, main

    assert main(["policy-server", f"checkpoint={reach_run}", "policy.host=0.0.0.0"]) == EXIT_CONFIG_ERROR
    assert "policy.token" in capsys.readouterr().err


def test_a_safe_robot_sends_only_what_the_safety_layer_passes(reach_run: Path) -> None:
    """What a lab calling ``send_action`` by hand gets from ``build_robot``: no unchecked command."""
    from vla_rl.real_world.safe_robot import SafeRobot
    from vla_rl.real_world.safety import SafetyLayer

    loaded = load_trained_policy(reach_run)
    raw = LocalSimRobot(loaded.env)
    robot = SafeRobot(raw, SafetyLayer(SafetyConfig(), loaded.env.control_hz))
    with robot:
        measured = robot.get_observation().arm_qpos_rad
        nan = robot.send_action(JointCommand(np.full(7, np.nan), 0.04))
        jump = robot.send_action(JointCommand(measured + 1.0, 0.04))
        far = robot.send_action(JointCommand(measured + 0.3, 0.04))
    np.testing.assert_array_equal(nan.arm_qpos_rad, measured)  # held
    np.testing.assert_allclose(jump.arm_qpos_rad, raw.measured_at_send[1])  # held
    step = np.abs(far.arm_qpos_rad - raw.measured_at_send[2]).max()
    assert step <= 1.0 / loaded.env.control_hz + 1e-9  # clamped to 1 rad/s
    assert [c.arm_qpos_rad.tolist() for c in raw.sent] == [c.arm_qpos_rad.tolist() for c in (nan, jump, far)]
    assert robot.safety.counts["non_finite"] == 1 and robot.safety.counts["jump"] == 1


def test_without_safety_the_deployment_takes_the_steps_of_direct_evaluation(reach_run: Path) -> None:
    """Same seeds, lockstep robot, safety off: the joint state the policy sees is rebuilt from
    FK, commands come from the controllers, so the result must equal direct evaluation."""
    loaded = load_trained_policy(reach_run)
    cfg = DeployConfig(episodes=EPISODES, safety=SafetyConfig(enabled=False))
    result, _ = _deploy(cfg, loaded)
    direct = evaluate_on_seeds(loaded, [cfg.seed + i for i in range(EPISODES)])
    assert [e.success for e in result.episodes] == direct
    assert np.mean(direct) >= 0.75, "the fixture's policy should solve reach"
    assert all(e.steps == 50 for e in result.episodes)  # reach episodes are 50 periods


def test_default_safety_slows_the_arm_but_the_task_still_succeeds(reach_run: Path) -> None:
    loaded = load_trained_policy(reach_run)
    cfg = DeployConfig(episodes=EPISODES)
    result, robot = _deploy(cfg, loaded)
    direct = evaluate_on_seeds(loaded, [cfg.seed + i for i in range(EPISODES)])
    assert abs(result.success_rate - np.mean(direct)) <= 0.25
    assert result.safety_counts["ee_speed"] + result.safety_counts["joint_speed"] > 0
    period = 1.0 / loaded.env.control_hz
    steps = np.stack([c.arm_qpos_rad for c in robot.sent]) - np.stack(robot.measured_at_send)
    assert np.abs(steps).max() <= cfg.safety.max_joint_speed_rad_s * period + 1e-9


@pytest.mark.parametrize("logit", [8.0, -8.0], ids=["fires", "never_fires"])
def test_a_success_classifier_ends_episodes_and_the_simulators_flag_is_kept_beside_it(
    reach_run: Path, tmp_path: Path, logit: float
) -> None:
    classifier = tiny_classifier(tmp_path / "classifier", logit)
    success = SuccessSection("classifier", str(classifier), 0.9, consecutive_steps=3, instruction="x")
    # 50 periods: reach's episode length, so the simulator's flag covers the whole episode.
    cfg = DeployConfig(episodes=4, max_steps=50, success=success, safety=SafetyConfig(enabled=False))
    loaded = load_trained_policy(reach_run)
    assert loaded.env.cameras == []
    loaded.env = deployment_env(cfg, loaded.env)
    assert loaded.env.cameras == ["front"]  # rendered for the classifier
    result, _ = _deploy(cfg, loaded)
    direct = evaluate_on_seeds(loaded, [cfg.seed + i for i in range(4)])
    if logit > 0:
        # Judged on each fresh observation before acting: the third in a row ends the episode, two
        # periods in, long before the arm reaches the target.
        assert all(e.success and e.steps == 2 and e.sim_success is False for e in result.episodes)
        assert result.summary()["sim_success_rate"] == 0.0
    else:
        # The classifier never fires: max_steps ends every episode as a failure, and the simulator's
        # flag, which decided nothing, reads what direct evaluation of the same seeds reads.
        assert all(e.success is False and e.steps == 50 for e in result.episodes)
        assert [e.sim_success for e in result.episodes] == direct and any(direct)
        assert result.success_rate == 0.0


def test_the_cameras_a_recording_names_are_added_to_what_the_robot_reports(tmp_path: Path) -> None:
    env = EnvConfig(cameras=["wrist"])
    classifier = str(tiny_classifier(tmp_path / "classifier", 0.0))  # reads "front"
    success = SuccessSection("classifier", classifier, 0.9, instruction="x")
    recording = RecordingSection(enabled=True, cameras=["front", "side", "wrist"])
    assert deployment_env(DeployConfig(success=success, recording=recording), env).cameras == [
        "wrist",
        "front",
        "side",
    ]
    off = RecordingSection(enabled=False, cameras=["side"])
    assert deployment_env(DeployConfig(recording=off), env).cameras == ["wrist"]
    assert deployment_env(DeployConfig(recording=RecordingSection(enabled=True)), env) == env


def _serve_in_subprocess(reach_run: Path, port: int) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "vla_rl.cli",
        "policy-server",
        f"checkpoint={reach_run}",
        f"policy.port={port}",
    ]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = server.stdout.readline()
    assert "serving" in line, line
    return server


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("queued", [False, True], ids=["blocking", "action_queue"])
def test_a_killed_policy_server_makes_the_robot_hold_and_report(
    reach_run: Path, flow_chunk_run: Path, queued: bool
) -> None:
    """Blocking: the reach PPO policy, one request per period. Queued: a flow policy's chunks of 8
    fetched in the background while the robot runs in real time."""
    run = flow_chunk_run if queued else reach_run
    loaded = load_trained_policy(run)
    port = _free_port()
    server = _serve_in_subprocess(run, port)
    client = PolicyClient("127.0.0.1", port, timeout_s=2.0)
    robot = LocalSimRobot(loaded.env, realtime=queued)
    kill_at_step = 10
    killed_at: list[int] = []

    def infer(observation):  # noqa: ANN001, ANN202
        if len(robot.sent) >= kill_at_step and server.poll() is None:
            killed_at.append(len(robot.sent))
            os.kill(server.pid, signal.SIGKILL)
            server.wait()
        return client.infer(observation).actions

    cfg = compose_deploy_config(["episodes=1", f"action_queue.enabled={str(queued).lower()}"])
    try:
        result, robot = _deploy(cfg, loaded, infer=infer, robot=robot)
    finally:
        server.kill()
        client.close()
    episode = result.episodes[0]
    queued_actions = 8 if queued else 0  # what a chunk fetched before the kill still covers
    assert episode.policy_failures >= 50 - killed_at[0] - queued_actions - 2, "periods without policy"
    assert episode.held_steps >= episode.policy_failures - cfg.safety.watchdog_periods
    moving = np.stack(robot.measured_at_send[:kill_at_step])
    assert np.abs(np.diff(moving, axis=0)).max() > 1e-2, "the arm was moving before the kill"
    # After the watchdog the targets are the measured pose: the arm comes to rest and stays.
    settle = killed_at[0] + queued_actions + cfg.safety.watchdog_periods + 5
    targets = np.stack([c.arm_qpos_rad for c in robot.sent[settle:]])
    assert np.abs(np.diff(targets, axis=0)).max() < 1e-3
    measured = np.stack(robot.measured_at_send[settle:])
    assert np.abs(np.diff(measured, axis=0)).max() < 1e-3


def test_recording_keeps_sent_commands_safety_events_and_interventions(
    reach_run: Path, tmp_path: Path
) -> None:
    from vla_rl.real_world.recording import DeploymentRecorder, decode_safety_events

    from vla_rl.data.lerobot_format import open_dataset

    loaded = load_trained_policy(reach_run)
    home = np.array([0.0, 0.0, 0.0, -2.4, 0.0, 2.4, 0.785398])
    takeover = {step: JointCommand(home + 0.01 * step, 0.08) for step in (5, 6, 7)}
    recorder = DeploymentRecorder(tmp_path / "data", loaded.env.control_hz, loaded.env.control_mode, [])
    cfg = DeployConfig(episodes=2)
    with recorder:
        result, robot = _deploy(cfg, loaded, recorder=recorder, intervention=ScriptedIntervention(takeover))
    dataset = open_dataset(tmp_path / "data")
    assert dataset.num_episodes == 2
    episode = dataset.episode(0)
    assert len(episode) == result.episodes[0].steps == 50
    assert episode.extras["intervention"].nonzero()[0].tolist() == [5, 6, 7]
    sent = np.stack([c.arm_qpos_rad for c in robot.sent[:50]])
    np.testing.assert_allclose(episode.extras["command.arm_qpos_rad"], sent)
    masks = episode.extras["safety.events"]
    assert any("ee_speed" in decode_safety_events(int(m)) for m in masks)
    assert episode.success == result.episodes[0].success


def test_steps_whose_recorded_frames_lag_the_state_are_flagged_and_not_acted_on(
    reach_run: Path, tmp_path: Path
) -> None:
    from vla_rl.real_world.recording import IMAGES_UNSYNCED_KEY, DeploymentRecorder

    from vla_rl.data.lerobot_format import open_dataset

    loaded = load_trained_policy(reach_run)  # reads no camera: the robot renders two beside it
    robot = LaggingCameras(dataclasses.replace(loaded.env, cameras=["front", "wrist"]))
    recorder = DeploymentRecorder(
        tmp_path / "data", loaded.env.control_hz, loaded.env.control_mode, ["front"]
    )
    proposals: list[Any] = []

    def infer(obs: dict[str, Any]) -> Any:
        proposals.append(obs)
        return loaded.infer(obs)

    with recorder:
        result, _ = _deploy(DeployConfig(episodes=2), loaded, infer=infer, robot=robot, recorder=recorder)
    dataset = open_dataset(tmp_path / "data")
    seen = 0
    for index, report in enumerate(result.episodes):
        # Each episode's observations: one per step, then the one at which the simulator said done.
        stepped = robot.unsynced[seen : seen + report.steps]
        seen += report.steps + 1
        flags = dataset.episode(index).extras[IMAGES_UNSYNCED_KEY]
        assert flags.tolist() == ["front" in cameras for cameras in stepped]  # the wrist is not recorded
        assert report.unsynced_steps == sum(bool(cameras) for cameras in stepped)
        assert flags.any() and report.unsynced_steps > flags.sum()
    assert seen == len(robot.unsynced)
    # The policy is asked only on steps whose every frame is the step's own.
    assert len(proposals) == sum(r.steps - r.unsynced_steps for r in result.episodes)


def test_deploy_config_defaults_and_pass_through() -> None:
    default = compose_deploy_config([])
    assert (default.robot.image_transport, default.robot.command_type) == ("raw", "joint_trajectory")
    assert default.robot.pose_frame_id == "panda_link0"
    overrides = ["robot.simulated=false", "max_steps=10", "robot.image_transport=compressed"]
    overrides += ["robot.command_type=pose_stamped", "robot.pose_frame_id=fr3_link0"]
    for transport in ("ros1", "ros2"):
        cfg = compose_deploy_config([*overrides, f"robot.transport={transport}"])
        robot = build_robot(cfg, EnvConfig(task="reach"))
        assert robot.safety.config == cfg.safety  # behind the safety layer
        config: Any = robot.robot.config  # type: ignore[attr-defined]
        passed = (config.image_transport, config.command_type, config.pose_frame_id)
        assert passed == ("compressed", "pose_stamped", "fr3_link0")


def test_a_crop_is_passed_to_the_robot_for_a_camera_that_is_read_and_refused_for_one_that_is_not() -> None:
    cfg = compose_deploy_config(["+robot.image_crops.front=[40,80,400,400]"])
    robot = build_robot(cfg, EnvConfig(task="reach", cameras=["front"]))
    assert robot.robot.config.image_crops == {"front": (40, 80, 400, 400)}  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"'robot.image_crops': no camera \['front'\] is read here"):
        build_robot(cfg, EnvConfig(task="reach", cameras=["wrist"]))


REAL_ARM = ["robot.simulated=false", "max_steps=5"]
CLASSIFIER = ["success.kind=classifier", "success.classifier_path=c", "success.instruction=x", "max_steps=9"]


@pytest.mark.parametrize(
    ("overrides", "key", "reason"),
    [
        (["robot.image_transport=theora"], "robot.image_transport", "must be one of"),
        ([*REAL_ARM, "robot.command_type=joint_velocity"], "robot.command_type", "must be one of"),
        (["robot.command_type=pose_stamped"], "robot.command_type", "sim-robot takes JointTrajectory only"),
        (
            [*REAL_ARM, "robot.command_type=pose_stamped", "robot.pose_frame_id="],
            "robot.pose_frame_id",
            "base",
        ),
        (["success.kind=keyboard"], "success.kind", "must be one of"),
        ([*CLASSIFIER, "success.classifier_path="], "success.classifier_path", "reward-train"),
        ([*CLASSIFIER, "success.instruction= "], "success.instruction", "trained with"),
        ([*CLASSIFIER, "max_steps=0"], "max_steps", "classifier may never end"),
        ([*CLASSIFIER, "success.threshold=1.5"], "success.threshold", ""),
        (["+robot.image_crops.front=[0,0,0,64]"], "robot.image_crops", r"height, width > 0"),
        (["+robot.image_crops.front=[-1,0,8,8]"], "robot.image_crops", r"top, left >= 0"),
        (["+robot.image_crops.front=[0,0,8]"], "robot.image_crops", r"\[top, left, height, width\]"),
        (["robot.sim_image_size=-64"], "robot.sim_image_size", "must not be negative"),
        (["robot.sim_image_width=-640"], "robot.sim_image_width", "must not be negative"),
        (["robot.image_wait_s=-0.01"], "robot.image_wait_s", "must not be negative"),
    ],
)
def test_deploy_config_rejects_bad_variants(overrides: list[str], key: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'.*{reason}"):
        compose_deploy_config(overrides)
