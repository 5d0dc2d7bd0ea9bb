"""The actor beside the robot: act with the learner's latest SAC actor behind the safety layer, let a
person take over, end episodes on success, reset the scene, and stream every step to the learner.

Each control period (paced by the robot's joint states, as ``vla-rl deploy`` is):

1. the robot's observation becomes the learner's observation vector: the keys its
   ``policy.obs_keys`` name, built as for a deployed policy (``policy_runner.ObservationBuilder``:
   ``proprio`` from the measured joints by the arm's kinematics, ``privileged`` from the robot's task
   state). On a real robot the task state comes from a tracker; in rehearsals the simulated robot
   publishes the simulator's own object state there, which stands in for it;
2. the success source judges it (``online_success``): the step that led here gets reward 1 and
   terminates the episode on success; the simulator's time limit, a person's failure label or
   ``max_steps`` truncate it; otherwise reward 0. That step goes to the learner
   (``LearnerClient``, which queues and resends what the learner did not acknowledge);
3. the intervention input may take over (the robot's teleoperation topics, an evdev device, or in
   rehearsals the scripted expert): its command is sent, and the step's action is the takeover's
   label in the policy's units (``action_labels.command_to_action`` of the command as sent), flagged
   ``intervention``; otherwise the SAC actor acts (sampled, or its mean with ``deterministic``) and
   its action becomes a joint target through the simulator's controller;
4. every command passes the safety layer (``SafeRobot.apply``); each step is recorded
   (``DeploymentRecorder``) with the safety events and the intervention flag.

Faults. Until the client has loaded weights the actor holds: it starts no episode and sends no
motion command. When the learner stops answering, it acts on with the weights it has
(``on_learner_lost: keep``; the transitions wait in the client's queue) or holds the measured pose
through the safety layer until the learner answers again (``hold``); the steps held are recorded but
not sent as transitions. Between episodes the reset routine runs (``online_reset``). A period whose
camera frames came too late (``unsynced_cameras``) gets no action; for a learner that reads that
camera, neither it nor the step before it (unless that step ends in success: its next observation is
never bootstrapped from) is sent.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from vla_rl.real_world.action_labels import command_to_action
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.learner_client import LearnerClient
from vla_rl.real_world.online_config import LearnOnlineConfig
from vla_rl.real_world.online_reset import ResetRoutine
from vla_rl.real_world.online_residual import FrozenPlanner
from vla_rl.real_world.online_success import Judgement, SuccessSource
from vla_rl.real_world.online_summary import ActorSummary, EpisodeStats
from vla_rl.real_world.policy_runner import CommandMapper, ObservationBuilder, missing_keys
from vla_rl.real_world.recording import DeploymentRecorder, NoIntervention
from vla_rl.real_world.robot import InterventionInput, JointCommand, Robot, RobotError, RobotObservation
from vla_rl.real_world.safe_robot import SafeRobot
from vla_rl.real_world.safety import SafetyLayer
from vla_rl.robots.controllers import ControllerSettings

from vla_rl.envs.config import EnvConfig
from vla_rl.policies.sac_networks import SACPolicy
from vla_rl.training.off_policy.frozen_policy_config import BASE_ACTION_KEY
from vla_rl.training.off_policy.frozen_policy_env import with_base_action_space
from vla_rl.training.off_policy.networks import build_networks
from vla_rl.training.off_policy.remote_link import obs_dtype

log = logging.getLogger(__name__)

WEIGHTS_POLL_S = 0.05
"""How often a holding actor asks the learner for weights again."""
FLUSH_AT_END_S = 5.0
"""How long the actor tries to deliver its queued transitions when it is done."""


@dataclass
class PendingStep:
    """A step whose outcome (reward, end) the next observation decides."""

    obs: dict[str, np.ndarray]
    action: np.ndarray
    intervention: bool


def wire_value(key: str, value: Any) -> np.ndarray:  # noqa: ANN401 - an array or a list of numbers
    """Observation ``key`` as a transitions message carries it (``remote_link.obs_dtype``): an image
    as it is, anything else flattened."""
    if obs_dtype(key) != np.uint8:
        return np.asarray(value, np.float32).reshape(-1)
    image = np.asarray(value)
    if image.dtype != np.uint8:
        raise RobotError(f"camera image {key!r} is {image.dtype}, expected uint8")
    return image


def transition_message(
    step: PendingStep, next_obs: dict[str, np.ndarray], reward: float, terminated: bool, truncated: bool
) -> dict[str, Any]:
    """One step as a transitions message of one row (``remote_link``'s layout)."""
    return {
        "obs": {key: value[None] for key, value in step.obs.items()},
        "next_obs": {key: value[None] for key, value in next_obs.items()},
        "action": np.asarray(step.action, np.float32)[None],
        "reward": np.array([reward], np.float32),
        "terminated": np.array([terminated]),
        "truncated": np.array([truncated]),
        "intervention": np.array([step.intervention]),
    }


def actor_networks(off_cfg: Any) -> SACPolicy:  # noqa: ANN401 - OffPolicyConfig
    """The learner's networks (``SACPolicy``) for its env's spaces (with ``base_action`` for residual
    RL); only ``actor`` is used here."""
    from vla_rl.envs import make_env

    env = make_env(off_cfg.env)
    try:
        space = env.observation_space
        if off_cfg.frozen_policy.mode == "residual":
            space = with_base_action_space(space, env.action_space.shape[0])
        return build_networks(off_cfg, space, env.action_space.shape[0]).eval()
    finally:
        env.close()


class OnlineActor:
    """Runs episodes on one robot for one learner (see the module docstring)."""

    def __init__(
        self,
        cfg: LearnOnlineConfig,
        env: EnvConfig,
        obs_keys: list[str],
        networks: SACPolicy,
        client: LearnerClient,
        robot: Robot,
        success: SuccessSource,
        reset: ResetRoutine,
        intervention: InterventionInput | None = None,
        recorder: DeploymentRecorder | None = None,
        seed: int | None = None,
        instruction: str = "",
        residual: FrozenPlanner | None = None,
    ) -> None:
        self.cfg, self.env, self.obs_keys = cfg, env, list(obs_keys)
        self.networks, self.client = networks, client
        self.success, self.reset_routine = success, reset
        self.intervention = intervention or NoIntervention()
        self.recorder = recorder
        self.seed = cfg.seed if seed is None else seed
        self.instruction = instruction
        self.residual = residual
        """Residual RL: the frozen policy whose actions the SAC actor corrects (None: SAC acts alone)."""
        self.period_s = 1.0 / float(env.control_hz)
        kinematics = ArmKinematics()
        self.kinematics = kinematics
        self.controller_settings = ControllerSettings(**env.options.get("controller", {}))
        self.build_obs = ObservationBuilder(kinematics, instruction)
        self.to_command = CommandMapper(env, kinematics)
        if not isinstance(robot, SafeRobot):
            robot = SafeRobot(robot, SafetyLayer(cfg.safety, env.control_hz, kinematics=kinematics))
        self.robot: SafeRobot = robot
        self.generator = torch.Generator().manual_seed(self.seed)
        self.summary = ActorSummary(client.actor_id)
        self._last_answer_s = time.monotonic()
        self._proposed: JointCommand | None = None

    # ----- the learner --------------------------------------------------------------------------------
    def sync(self) -> bool:
        """Ask the learner for new weights; True when it answered (new weights or not)."""
        skipped = self.client.backing_off
        self.client.last_error = None
        if self.client.sync_weights():
            self.summary.weights_versions.append(int(self.client.version))  # type: ignore[arg-type]
            log.info("%s: loaded weights version %s", self.client.actor_id, self.client.version)
        answered = not skipped and self.client.last_error is None
        if answered:
            self._last_answer_s = time.monotonic()
        return answered

    def learner_lost(self) -> bool:
        """Hold because of the learner: no weights yet, or (``hold``) no answer for too long."""
        if self.client.holding:
            return True
        silent_s = time.monotonic() - self._last_answer_s
        return self.cfg.on_learner_lost == "hold" and silent_s > self.cfg.learner_lost_after_s

    def wait_for_weights(self) -> None:
        """Block, sending nothing to the robot, until the client has weights (or the timeout)."""
        timeout_s = self.cfg.first_weights_timeout_s
        deadline = time.monotonic() + timeout_s if timeout_s > 0 else None
        while True:
            self.sync()
            if not self.client.holding:
                return
            if deadline is not None and time.monotonic() > deadline:
                where = f"{self.client.host}:{self.client.port}"
                raise RobotError(
                    f"no weights from the learner at {where} within {timeout_s} s ({self.client.last_error})"
                )
            self.client.flush()
            time.sleep(WEIGHTS_POLL_S)

    @torch.no_grad()
    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The SAC actor's action [A] in [-1, 1] for one observation vector."""
        batch = {key: torch.from_numpy(value)[None] for key, value in obs.items()}
        features = self.networks.encode(batch)
        actor = self.networks.actor
        action = (
            actor.deterministic(features)
            if self.cfg.deterministic
            else actor.sample(features, self.generator)[0]
        )
        return action[0].numpy().astype(np.float32)

    # ----- episodes -----------------------------------------------------------------------------------
    def run(self, episodes: int | None = None) -> ActorSummary:
        try:
            for index in range(self.cfg.episodes if episodes is None else episodes):
                stats = self.run_episode(index)
                self.summary.episodes.append(stats)
                log.info("%s episode %d: %s", self.client.actor_id, index, stats)
                print(
                    f"{self.client.actor_id} episode {index}: {stats.ended_by} "
                    f"after {stats.steps} steps, {stats.intervention_steps} taken over, "
                    f"weights v{stats.weights_version}",
                    flush=True,
                )
        finally:
            self.finish()
        return self.summary

    def finish(self) -> None:
        """Try for a while to deliver what is queued; fill the summary's counters."""
        deadline = time.monotonic() + FLUSH_AT_END_S
        while not self.client.flush() and time.monotonic() < deadline:
            time.sleep(WEIGHTS_POLL_S)
        s = self.summary
        s.safety_counts = dict(self.robot.safety.counts)
        s.sent_rows, s.dropped, s.pending = (
            self.client.sent_rows,
            self.client.dropped,
            len(self.client.pending),
        )

    def run_episode(self, index: int) -> EpisodeStats:
        self.wait_for_weights()
        seed = self.seed + index
        last_stamp = self.reset_routine.reset(seed)
        self.robot.safety.reset()
        self.intervention.reset()
        self.success.reset()
        if self.residual is not None:
            self.residual.reset()
        self._proposed = None
        stats = EpisodeStats(index, seed, watched=self.intervention.watching)
        if self.recorder is not None:
            self.recorder.start_episode(self.instruction)
        pending: PendingStep | None = None
        obs: RobotObservation | None = None
        try:
            while True:
                fresh = self.robot.wait_for_new_observation(
                    last_stamp, max(1, self.cfg.safety.watchdog_periods) * self.period_s
                )
                if not fresh and obs is None:
                    raise RobotError("no joint state at the start of the episode")
                obs = self.robot.get_observation()
                last_stamp = obs.joint_state_stamp_s
                policy_obs = self.build_obs(obs)
                vector = self.observation_vector(policy_obs)
                if fresh and stats.steps > 0:
                    judgement = self.success.judge(obs, self.period_s)
                    if judgement.sim_success is not None:
                        stats.sim_success = bool(stats.sim_success) or judgement.sim_success
                    limit = self.cfg.max_steps > 0 and stats.steps >= self.cfg.max_steps
                    ended = self._end_of(judgement, limit)
                    if pending is not None and not judgement.success and self._late_for_learner(obs):
                        stats.late_frame_transitions += 1  # its next frames would be bootstrapped from
                    elif pending is not None:
                        truncated = bool(ended) and not judgement.success
                        self._send(
                            stats, pending, vector, float(judgement.success), judgement.success, truncated
                        )
                    pending = None
                    if ended:
                        stats.success, stats.ended_by = judgement.success, ended
                        break
                pending = self._step(obs, policy_obs, vector, stats, fresh)
        finally:
            if self.recorder is not None and self.recorder.instruction is not None:
                if self.recorder.frames:
                    self.recorder.end_episode(stats.success)
                else:
                    self.recorder.instruction = None
            stats.weights_version = self.client.version
        return stats

    @staticmethod
    def _end_of(judgement: Judgement, limit: bool) -> str:
        if judgement.success:
            return "success"
        if judgement.ended:
            return judgement.ended
        return "max_steps" if limit else ""

    def observation_vector(self, policy_obs: dict[str, Any]) -> dict[str, np.ndarray]:
        """The learner's keys of ``policy_obs`` as a transitions message carries them: camera images
        uint8 [H, W, 3], everything else a flat float32 vector (residual RL: with the coming period's
        frozen action as ``base_action``)."""
        if self.residual is not None:
            policy_obs = {**policy_obs, BASE_ACTION_KEY: self.residual.base_action(policy_obs)}
        absent = missing_keys(self.obs_keys, policy_obs)
        if absent:
            raise RobotError(f"the learner reads {absent}, which the robot does not report")
        return {key: wire_value(key, policy_obs[key]) for key in self.obs_keys}

    def _step(
        self,
        obs: RobotObservation,
        policy_obs: dict[str, Any],
        vector: dict[str, np.ndarray],
        stats: EpisodeStats,
        fresh: bool,
    ) -> PendingStep | None:
        """Command one period; the step to send once its outcome is known (None: nothing to learn)."""
        self.sync()
        self.intervention.observe(obs, self._proposed)
        teleop = self.intervention.poll()
        # What the learner stores: SAC's action (residual RL: the residual), or a takeover's label;
        # and the policy's action in the env's units as sent (None while taken over or held).
        action: np.ndarray | None = None
        executed: np.ndarray | None = None
        lost = False
        if teleop is not None:
            command: JointCommand | None = JointCommand(teleop.arm_qpos_rad, teleop.gripper_opening_m)
        elif not fresh or obs.extras.get("unsynced_cameras"):
            command = None  # no new observation, or frames of another period: the watchdog decides
        elif self.learner_lost():
            lost = True  # hold the measured pose now, not after the watchdog's periods
            command = JointCommand(obs.arm_qpos_rad.copy(), obs.gripper_opening_m)
        else:
            action = self.act(vector)
            executed = action
            if self.residual is not None:
                executed = self.residual.executed(vector[BASE_ACTION_KEY], action)
            command = self.to_command(executed, obs, obs.joint_state_stamp_s)
        if command is not None:
            command.stamp_s = obs.joint_state_stamp_s
        self._proposed = command.copy() if action is not None else None
        decision = self.robot.apply(command, obs)
        stats.steps += 1
        stats.held_steps += int(decision.held)
        stats.unsynced_steps += int(bool(obs.extras.get("unsynced_cameras")))
        stats.learner_hold_steps += int(lost)
        stats.intervention_steps += int(teleop is not None)
        if teleop is not None:
            action = command_to_action(
                decision.command,
                obs.arm_qpos_rad,
                self.env.control_mode,
                self.kinematics,
                self.controller_settings,
            )
            if self.residual is not None:
                action = self.residual.label(vector[BASE_ACTION_KEY], action)
        if self.residual is not None and action is not None:  # a held period executes no frozen action
            self.residual.advance()
        if self.recorder is not None:
            self.recorder.add_frame(
                proprio=policy_obs["proprio"],
                images={c: obs.images[c] for c in self.recorder.cameras},
                policy_action=executed,
                sent=decision.command,
                measured_arm_qpos_rad=obs.arm_qpos_rad,
                safety_events=decision.events,
                held=decision.held,
                intervention=teleop is not None,
                privileged=policy_obs.get("privileged"),
                unsynced_cameras=obs.extras.get("unsynced_cameras", ()),
            )
        if action is None:
            return None
        if self._late_for_learner(obs):  # a takeover on an older frame than its state
            stats.late_frame_transitions += 1
            return None
        return PendingStep(vector, np.clip(action, -1.0, 1.0).astype(np.float32), teleop is not None)

    def _late_for_learner(self, obs: RobotObservation) -> bool:
        """Whether a camera the learner reads has no frame of ``obs``'s period."""
        return any(f"rgb_{camera}" in self.obs_keys for camera in obs.extras.get("unsynced_cameras", ()))

    def _send(
        self,
        stats: EpisodeStats,
        step: PendingStep,
        next_obs: dict[str, np.ndarray],
        reward: float,
        terminated: bool,
        truncated: bool,
    ) -> None:
        self.client.send_transitions(transition_message(step, next_obs, reward, terminated, truncated))
        stats.transitions += 1
