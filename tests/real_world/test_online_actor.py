"""The online actor on the simulated reach robot in this process (no ROS), streaming to a real learner
server on 127.0.0.1: it holds without weights, its transitions carry the sparse reward, the ends and
the intervention flags the episodes had (checked step by step), every command passes the safety layer,
a saved success classifier ends episodes, a pose reset drives the arm home through the safety
layer, a learner that goes silent mid-episode makes a ``hold`` actor hold (sending nothing to learn)
and a ``keep`` actor act on with its last weights, both resuming when it answers again, a step whose
camera frame lags is neither acted on nor sent, and a pixel learner gets the robot's frames and
gives the actor its camera encoder."""

from __future__ import annotations

import os

if not os.environ.get("DISPLAY"):  # the classifier's camera is rendered headless
    os.environ.setdefault("MUJOCO_GL", "egl")

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from lagging_robot import LaggingCameras
from online_learner import PIXELS, Learner, build_actor, config, serving
from success_models import tiny_classifier
from vla_rl.real_world.action_labels import command_to_action
from vla_rl.real_world.deploy_config import SuccessSection
from vla_rl.real_world.expert_intervention import ExpertIntervention
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.local_sim import LocalSimControl, LocalSimRobot
from vla_rl.real_world.online_actor import OnlineActor
from vla_rl.real_world.online_config import (
    InterventionSection,
    LearnerSection,
    ResetSection,
    actor_env,
)
from vla_rl.real_world.online_reset import PoseReset
from vla_rl.real_world.online_success import ClassifierSuccess
from vla_rl.real_world.recording import IMAGES_UNSYNCED_KEY, DeploymentRecorder
from vla_rl.real_world.robot import JointCommand
from vla_rl.real_world.safety_config import SafetyConfig
from vla_rl.robots.controllers import ControllerSettings
from vla_rl.robots.panda import PANDA

from vla_rl.data.lerobot_format import open_dataset
from vla_rl.envs.config import EnvConfig

TASK = "reach the red target"


@pytest.fixture
def learner():
    with serving(config()) as running:
        yield running


def test_the_actor_holds_without_weights_then_streams_flagged_steps_with_their_ends(
    learner: Learner, tmp_path: Path
) -> None:
    cfg = config(
        intervention=InterventionSection(
            kind="expert", drift_threshold=-1.0, drift_window=2, takeover_steps=3
        ),
        safety=SafetyConfig(max_ee_speed_m_s=0.6, max_joint_speed_rad_s=3.0, max_gripper_speed_m_s=1.0),
    )
    env = actor_env(cfg, learner.off.env)
    robot = LocalSimRobot(env)
    expert = ExpertIntervention("reach", cfg.intervention)
    recorder = DeploymentRecorder(tmp_path / "dataset", env.control_hz, env.control_mode, env.cameras)
    with robot:
        actor = build_actor(cfg, learner, robot, intervention=expert, recorder=recorder)
        result: dict = {}
        thread = threading.Thread(target=lambda: result.update(summary=actor.run()))
        thread.start()
        time.sleep(0.5)  # no weights published: the actor holds
        assert actor.client.holding and robot.sent == [] and thread.is_alive()
        learner.source.publish(0)
        thread.join(timeout=60.0)
        recorder.close()
    summary = result["summary"]
    assert summary.weights_versions == [0]
    rows = learner.rows()
    # Per episode: 2 policy steps fill the expert's window, it takes over, and its 2nd step reaches
    # the target: that step gets reward 1 and terminates; every other step 0, none truncated.
    assert [(e.steps, e.intervention_steps, e.ended_by) for e in summary.episodes] == [(4, 2, "success")] * 2
    assert all(e.sim_success for e in summary.episodes)  # the simulator's flag judged them
    assert all(e.watched for e in summary.episodes)  # watch probability 1: the expert watched each
    assert len(robot.sent) == 8 and len(rows) == 8 and summary.sent_rows == 8
    assert [bool(r.intervention[0]) for r in rows] == [False, False, True, True] * 2
    assert [float(r.reward[0]) for r in rows] == [0.0, 0.0, 0.0, 1.0] * 2
    assert [bool(r.terminated[0]) for r in rows] == [False, False, False, True] * 2
    assert not any(r.truncated[0] for r in rows)
    for previous, following in zip(rows[:3], rows[1:4], strict=True):  # next_obs chains in an episode
        np.testing.assert_array_equal(previous.next_obs["proprio"], following.obs["proprio"])
    # A takeover step's action is the label of the command as sent, in the policy's units.
    settings = ControllerSettings(**env.options.get("controller", {}))
    label = command_to_action(
        robot.sent[2], robot.measured_at_send[2], env.control_mode, ArmKinematics(), settings
    )
    np.testing.assert_allclose(rows[2].action[0], label, atol=1e-6)
    dataset = open_dataset(tmp_path / "dataset")
    assert dataset.num_episodes == 2 and dataset.episode(0).success
    assert dataset.episode(0).extras["intervention"].tolist() == [False, False, True, True]
    np.testing.assert_allclose(dataset.episode(0).actions[2], label, atol=1e-6)


def test_a_pixel_learner_gets_the_robots_frames_and_its_actors_act_with_its_camera_encoder() -> None:
    cfg = config(learner=LearnerSection(overrides=PIXELS), episodes=1, max_steps=6)
    with serving(cfg) as learner:
        learner.source.publish(0)
        robot = LocalSimRobot(actor_env(cfg, learner.off.env))
        with robot:
            actor = build_actor(cfg, learner, robot)
            trained = learner.networks.encoder.state_dict()
            own = actor.networks.encoder.state_dict()
            assert trained and not all(torch.equal(own[k], v) for k, v in trained.items())
            summary = actor.run()
        # The encoder the critic trains came with the actor's weights.
        assert all(torch.equal(actor.networks.encoder.state_dict()[k], v) for k, v in trained.items())
        rows = learner.rows()
    assert summary.episodes[0].steps == len(rows) == 6
    for row in rows:
        for key in ("rgb_front", "rgb_wrist"):
            assert row.obs[key].dtype == np.uint8 and row.obs[key].shape == (1, 32, 32, 3)
            assert row.obs[key].std() > 10  # a rendered scene, not a blank frame
    for previous, following in zip(rows[:-1], rows[1:], strict=True):  # next_obs chains the frames
        np.testing.assert_array_equal(previous.next_obs["rgb_wrist"], following.obs["rgb_wrist"])
    assert not np.array_equal(rows[0].obs["rgb_wrist"], rows[-1].next_obs["rgb_wrist"])  # the arm moved


def test_commands_that_ask_too_much_are_clipped_by_the_safety_layer(learner: Learner) -> None:
    cfg = config(episodes=1, max_steps=5, deterministic=True)
    with torch.no_grad():  # an actor whose mean action is always a full step: faster than the limit
        for parameter in learner.networks.actor.parameters():
            parameter.zero_()
        head = [m for m in learner.networks.actor.modules() if isinstance(m, torch.nn.Linear)][-1]
        head.bias[: head.bias.shape[0] // 2] = 5.0  # the mean half of [mean, log_std]
    learner.source.publish(0)
    env = actor_env(cfg, learner.off.env)
    robot = LocalSimRobot(env)
    with robot:
        actor = build_actor(cfg, learner, robot)
        summary = actor.run()
    counts = summary.safety_counts
    assert counts["ee_speed"] >= 4, counts
    period_s = 1.0 / env.control_hz
    for sent, measured in zip(robot.sent, robot.measured_at_send, strict=True):
        assert (
            np.max(np.abs(sent.arm_qpos_rad - measured)) <= cfg.safety.max_joint_speed_rad_s * period_s + 1e-9
        )
    assert summary.episodes[0].watched is None  # no intervention input that decides it
    rows = learner.rows()
    assert len(rows) == 5 and all(not r.intervention[0] for r in rows) and rows[-1].truncated[0]
    np.testing.assert_allclose(rows[0].action[0], np.tanh([5.0, 5.0, 5.0, 5.0]), atol=1e-6)


def test_a_step_whose_frame_lags_sends_no_transition_and_is_flagged_in_the_recording(
    learner: Learner, tmp_path: Path
) -> None:
    cfg = config(episodes=1, max_steps=15)
    learner.source.publish(0)
    env = dataclasses.replace(actor_env(cfg, learner.off.env), cameras=["front"])
    robot = LaggingCameras(env)  # the front frame lags every 7th period
    recorder = DeploymentRecorder(tmp_path / "dataset", env.control_hz, env.control_mode, ["front"])
    with robot, recorder:
        summary = build_actor(cfg, learner, robot, recorder=recorder).run()
    (episode,) = summary.episodes
    flags = open_dataset(tmp_path / "dataset").episode(0).extras[IMAGES_UNSYNCED_KEY]
    assert len(flags) == episode.steps == 15 and flags.sum() == episode.unsynced_steps >= 2
    assert len(learner.rows()) == episode.steps - episode.unsynced_steps  # the learner reads no camera
    assert episode.late_frame_transitions == 0


def test_a_pixel_learner_gets_no_transition_whose_frames_lag() -> None:
    # Front frames lag every 7th period, wrist frames every 5th: no action on those periods, and the
    # step before each is not sent either, since its next observation (bootstrapped from: no
    # episode ends in success here) would hold a frame older than its state.
    cfg = config(learner=LearnerSection(overrides=PIXELS), episodes=1, max_steps=15)
    with serving(cfg) as learner:
        learner.source.publish(0)
        robot = LaggingCameras(actor_env(cfg, learner.off.env))
        with robot:
            (episode,) = build_actor(cfg, learner, robot).run().episodes
        rows = learner.rows()
    acted = episode.steps - episode.unsynced_steps
    assert not episode.success and episode.unsynced_steps >= 4 and episode.late_frame_transitions >= 2
    assert len(rows) == episode.transitions == acted - episode.late_frame_transitions


@pytest.mark.parametrize(("logit", "steps"), [(8.0, 1), (-8.0, 6)])
def test_a_saved_success_classifier_ends_the_episode_with_the_sparse_reward(
    learner: Learner, tmp_path: Path, logit: float, steps: int
) -> None:
    path = tiny_classifier(tmp_path / "classifier", logit)
    success = SuccessSection(kind="classifier", classifier_path=str(path), threshold=0.9, instruction=TASK)
    cfg = config(episodes=1, max_steps=6, success=success)
    learner.source.publish(0)
    env = actor_env(cfg, learner.off.env)
    assert env.cameras == ["front"]  # the classifier's camera is rendered for it
    robot = LocalSimRobot(env)
    with robot:
        classifier = ClassifierSuccess(str(path), 0.9, 1, TASK, sim=LocalSimControl(robot))
        actor = build_actor(cfg, learner, robot, success=classifier)
        summary = actor.run()
    episode = summary.episodes[0]
    rows = learner.rows()
    assert episode.steps == steps and len(rows) == steps
    # The simulator's own flag is kept beside the classifier's judgement: an untrained arm does not
    # reach the target in a few steps, whatever the classifier says.
    assert episode.sim_success is False and summary.summary()["sim_success_rate"] == 0.0
    if logit > 0:
        assert episode.success and episode.ended_by == "success"
        assert rows[-1].reward[0] == 1.0 and rows[-1].terminated[0] and not rows[-1].truncated[0]
    else:
        assert not episode.success and episode.ended_by == "max_steps"
        assert all(r.reward[0] == 0.0 and not r.terminated[0] for r in rows) and rows[-1].truncated[0]


def test_a_pose_reset_drives_the_arm_home_through_the_safety_layer(learner: Learner) -> None:
    reset = ResetSection(kind="pose", max_joint_step_rad=0.04, tolerance_rad=0.02)
    cfg = config(episodes=1, max_steps=10, reset=reset)
    learner.source.publish(0)
    env = actor_env(cfg, learner.off.env)
    robot = LocalSimRobot(env)
    with robot:
        sim = LocalSimControl(robot)
        sim.reset(3)
        moved = np.array(PANDA.home_arm_qpos) + np.array([0.3, -0.2, 0.2, 0.2, 0.0, -0.2, 0.1])
        actor = build_actor(cfg, learner, robot)
        pose = PoseReset(actor.robot, reset, actor.period_s)
        actor.reset_routine = pose
        for _ in range(20):  # push the arm away from home, through the safety layer too
            obs = robot.get_observation()
            step = np.clip(moved - obs.arm_qpos_rad, -0.04, 0.04)
            actor.robot.apply(JointCommand(obs.arm_qpos_rad + step, 0.04, obs.joint_state_stamp_s), obs)
        away = robot.get_observation().arm_qpos_rad
        assert np.max(np.abs(away - np.array(PANDA.home_arm_qpos))) > 0.1
        sent_before = len(robot.sent)
        pose.reset(0)
        home = robot.get_observation().arm_qpos_rad
        assert np.max(np.abs(home - np.array(PANDA.home_arm_qpos))) <= reset.tolerance_rad
        assert 5 < pose.periods_used < reset.max_periods
        for sent, measured in zip(
            robot.sent[sent_before:], robot.measured_at_send[sent_before:], strict=True
        ):
            assert np.max(np.abs(sent.arm_qpos_rad - measured)) <= 0.04 + 1e-9


class OutageRobot(LocalSimRobot):
    """The simulated robot, calling ``events[n]`` right after its ``n``-th command (1-based)."""

    def __init__(self, env: EnvConfig, events: dict[int, Callable[[], None]]) -> None:
        super().__init__(env)
        self.events = events

    def send_action(self, command: JointCommand) -> JointCommand:
        sent = super().send_action(command)
        event = self.events.get(len(self.sent))
        if event is not None:
            event()
        return sent


SILENT_AFTER, BACK_AFTER, STEPS = 3, 7, 10
"""The learner stops answering after the actor's 3rd command and answers again after its 7th."""
LOST_AFTER_S = 0.1


def run_through_an_outage(learner: Learner, on_learner_lost: str) -> tuple[OnlineActor, OutageRobot, dict]:
    """One episode of ``STEPS`` periods on the lockstep robot; the learner is silent between commands
    ``SILENT_AFTER`` and ``BACK_AFTER``, each silence and return lasting past ``LOST_AFTER_S`` and the
    client's longest back-off. Weights ``1`` are published while it is silent."""
    cfg = config(
        episodes=1, max_steps=STEPS, on_learner_lost=on_learner_lost, learner_lost_after_s=LOST_AFTER_S
    )
    learner.source.publish(0)
    v0 = {name: value.clone() for name, value in learner.networks.actor.state_dict().items()}
    seen: dict = {"acted_before": [], "weights_in_outage": []}

    def silence() -> None:
        learner.go_silent()
        with torch.no_grad():  # newer weights the actor can only get once the learner is back
            for parameter in learner.networks.actor.parameters():
                parameter.add_(0.01)
        learner.source.publish(1)
        time.sleep(3 * LOST_AFTER_S)

    def back() -> None:
        state = actor.networks.actor.state_dict()
        seen["weights_in_outage"] = all(torch.equal(state[name], value) for name, value in v0.items())
        seen["pending_in_outage"] = len(actor.client.pending)
        learner.come_back()
        time.sleep(0.3)  # past the client's back-off (at most 0.2 s)

    env = actor_env(cfg, learner.off.env)
    robot = OutageRobot(env, {SILENT_AFTER: silence, BACK_AFTER: back})
    with robot:
        actor = build_actor(cfg, learner, robot)
        act = actor.act

        def counted_act(obs: dict) -> np.ndarray:
            seen["acted_before"].append(len(robot.sent) + 1)  # the command this action becomes
            return act(obs)

        actor.act = counted_act
        actor.run()
    return actor, robot, seen


def test_a_holding_actor_holds_through_a_silent_learner_and_acts_again_when_it_answers(
    learner: Learner,
) -> None:
    actor, robot, seen = run_through_an_outage(learner, "hold")
    episode = actor.summary.episodes[0]
    lost = list(range(SILENT_AFTER + 1, BACK_AFTER + 1))  # every period the learner was silent
    assert episode.steps == STEPS and len(robot.sent) == STEPS  # one command a period, each through
    # the safety layer (``SafeRobot.apply``), and no policy action while the learner is lost
    assert episode.learner_hold_steps == len(lost)
    assert [n for n in range(1, STEPS + 1) if n not in seen["acted_before"]] == lost
    # From the first silent period on, the actor commands the measured pose (through the safety
    # layer), rather than leaving the last target to be re-sent until the watchdog fires.
    for n in lost:
        np.testing.assert_array_equal(robot.sent[n - 1].arm_qpos_rad, robot.measured_at_send[n - 1])
    # The held periods are not sent to learn from; the others reach the learner once it is back.
    assert episode.transitions == STEPS - len(lost)
    rows = learner.rows()
    assert len(rows) == STEPS - len(lost) and actor.summary.sent_rows == len(rows)
    assert actor.summary.pending == 0
    # Once the learner answers, the actor loads its newer weights and acts with them.
    assert actor.summary.weights_versions == [0, 1] and episode.weights_version == 1
    assert seen["acted_before"][-(STEPS - BACK_AFTER) :] == list(range(BACK_AFTER + 1, STEPS + 1))


def test_a_keeping_actor_acts_on_with_its_last_weights_while_the_learner_is_silent(
    learner: Learner,
) -> None:
    actor, robot, seen = run_through_an_outage(learner, "keep")
    episode = actor.summary.episodes[0]
    assert episode.steps == STEPS and episode.learner_hold_steps == 0
    assert seen["acted_before"] == list(range(1, STEPS + 1))  # a policy action every period
    assert seen["weights_in_outage"]  # version 0's weights, though version 1 was published
    assert seen["pending_in_outage"] == BACK_AFTER - SILENT_AFTER  # its transitions waited in the queue
    assert episode.transitions == STEPS and len(learner.rows()) == STEPS
    assert actor.summary.sent_rows == STEPS and actor.summary.pending == 0
    assert actor.summary.weights_versions == [0, 1]
