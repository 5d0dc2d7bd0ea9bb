"""The deployment loop: robot observation -> policy -> joint target -> safety layer -> robot.

It runs at the robot's pace: each period starts when a new joint state arrives (at most
``watchdog_periods`` periods are waited for; then the safety layer holds). The policy runs in this
process or on a policy server, once per period from that period's observation, or asynchronously
through an action queue that a background thread refills. A person's teleoperation override (in
rehearsals, the scripted expert of ``expert_intervention``) replaces the policy's command. Every
command passes the safety layer, and what was actually sent is recorded with the safety events and
the intervention flag.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from vla_rl.real_world.action_queue import ActionQueue, AsyncChunker
from vla_rl.real_world.deploy_config import DeployConfig
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.online_success import ClassifierSuccess
from vla_rl.real_world.policy_runner import CommandMapper, ObservationBuilder, missing_keys
from vla_rl.real_world.recording import DeploymentRecorder, InterventionInput, NoIntervention
from vla_rl.real_world.robot import JointCommand, Robot, RobotError, RobotObservation
from vla_rl.real_world.safe_robot import SafeRobot
from vla_rl.real_world.safety import SafetyLayer
from vla_rl.real_world.sim_control import SimControl

from vla_rl.data.lerobot_layout import atomic_write_text
from vla_rl.envs.config import EnvConfig

log = logging.getLogger(__name__)

STAMP_MARGIN_S = 1e-5
"""Less than any control period, more than the rounding of stamps that crossed a transport."""

PolicyInfer = Callable[[dict[str, Any]], np.ndarray]
"""Policy observation -> float32 [chunk_len, action_dim] normalised actions (may raise)."""


@dataclass
class EpisodeReport:
    seed: int | None
    steps: int
    success: bool | None
    """From the simulated robot (``success.kind=sim``) or the success classifier (``classifier``);
    None on a real robot without a classifier (nobody measured it)."""
    held_steps: int = 0
    """Periods in which the safety layer held the measured pose."""
    interventions: int = 0
    policy_failures: int = 0
    """Periods without an action from the policy (server down, timeout, queue dry)."""
    unsynced_steps: int = 0
    """Periods whose camera images were not within the sync slop of the joint state."""
    sim_success: bool | None = None
    """Where a classifier judges success beside a simulated robot: the simulator's own flag on any
    period of the episode (the ground truth the classifier is measured against); None otherwise."""


@dataclass
class DeployResult:
    episodes: list[EpisodeReport] = field(default_factory=list)
    safety_counts: dict[str, int] = field(default_factory=dict)
    obs_to_command_s: list[float] = field(default_factory=list)
    """Per period: joint-state stamp to the command's publication (this side's clock, same host)."""

    @property
    def success_rate(self) -> float | None:
        labelled = [e.success for e in self.episodes if e.success is not None]
        return float(np.mean(labelled)) if labelled else None

    @property
    def sim_success_rate(self) -> float | None:
        """The simulator's success rate where a classifier judged the episodes (else None)."""
        flags = [e.sim_success for e in self.episodes if e.sim_success is not None]
        return float(np.mean(flags)) if flags else None

    def summary(self) -> dict[str, Any]:
        latency = np.asarray(self.obs_to_command_s) * 1e3
        return {
            "episodes": len(self.episodes),
            "success_rate": self.success_rate,
            "sim_success_rate": self.sim_success_rate,
            "safety_counts": self.safety_counts,
            "obs_to_command_ms": {
                "p50": float(np.percentile(latency, 50)) if len(latency) else None,
                "p99": float(np.percentile(latency, 99)) if len(latency) else None,
            },
            "per_episode": [asdict(e) for e in self.episodes],
        }

    def write(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.summary(), indent=2))


class Deployment:
    """Runs episodes of one policy on one robot (see the module docstring)."""

    def __init__(
        self,
        cfg: DeployConfig,
        env: EnvConfig,
        obs_keys: list[str],
        robot: Robot,
        infer: PolicyInfer,
        sim: SimControl | None = None,
        recorder: DeploymentRecorder | None = None,
        intervention: InterventionInput | None = None,
        instruction: str = "",
    ) -> None:
        self.cfg, self.env, self.obs_keys = cfg, env, obs_keys
        self.infer, self.sim = infer, sim
        self.recorder = recorder
        self.intervention = intervention or NoIntervention()
        self.instruction = instruction
        self.control_hz = float(env.control_hz)
        kinematics = ArmKinematics()
        self.build_obs = ObservationBuilder(kinematics, instruction)
        self.to_command = CommandMapper(env, kinematics)
        if not isinstance(robot, SafeRobot):
            robot = SafeRobot(robot, SafetyLayer(cfg.safety, self.control_hz, kinematics=kinematics))
        self.robot: SafeRobot = robot
        self.safety = robot.safety
        self.queue: ActionQueue | None = None
        self.chunker: AsyncChunker | None = None
        if cfg.action_queue.enabled:
            self.queue = ActionQueue(cfg.action_queue.merge, cfg.action_queue.ensemble_decay)
            self.chunker = AsyncChunker(infer, self.queue, cfg.action_queue.refill_threshold)
        self.classifier: ClassifierSuccess | None = None
        """``success.kind=classifier``: the learned success model that ends episodes."""
        if cfg.success.kind == "classifier":
            judge = cfg.success
            self.classifier = ClassifierSuccess(
                judge.classifier_path, judge.threshold, judge.consecutive_steps, judge.instruction, sim
            )
        self.result = DeployResult()
        self._proposed: JointCommand | None = None
        """The policy's command of the previous step, before the safety layer (the intervention
        input watches it); None when the policy drove nothing."""

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_hz

    def run(self) -> DeployResult:
        try:
            for index in range(self.cfg.episodes):
                report = self.run_episode(index)
                self.result.episodes.append(report)
                log.info("episode %d: %s", index, report)
        finally:
            if self.chunker is not None:
                self.chunker.close()
        self.result.safety_counts = dict(self.safety.counts)
        return self.result

    def run_episode(self, index: int) -> EpisodeReport:
        seed = self.cfg.seed + index if self.sim is not None else None
        last_stamp = -np.inf
        if self.sim is not None:
            # The reset's own observation counts as new: stamps are float seconds near 1.8e9, whose
            # resolution is about 2.4e-7 s, and stamps of consecutive periods are milliseconds apart.
            last_stamp = self.sim.reset(seed).stamp_s - STAMP_MARGIN_S
        self.safety.reset()
        self.intervention.reset()
        if self.classifier is not None:
            self.classifier.reset()
        self._proposed = None
        if self.queue is not None:
            self.queue.clear()
        max_steps = self.cfg.max_steps or None
        report = EpisodeReport(seed=seed, steps=0, success=None)
        if self.recorder is not None:
            self.recorder.start_episode(self.instruction)
        obs: RobotObservation | None = None
        try:
            while max_steps is None or report.steps < max_steps:
                fresh = self.robot.wait_for_new_observation(
                    last_stamp, self.cfg.safety.watchdog_periods * self.period_s
                )
                if not fresh and obs is None:
                    raise RobotError("no joint state at the start of the episode")
                obs = self.robot.get_observation()
                last_stamp = obs.joint_state_stamp_s
                if fresh and self._episode_over(obs, report):
                    break
                self._step(obs, report, fresh)
            if self.classifier is not None and report.success is None:
                report.success = False  # max_steps ran out before the classifier fired
        finally:
            if self.recorder is not None:
                self.recorder.end_episode(report.success)
        return report

    def _episode_over(self, obs: RobotObservation, report: EpisodeReport) -> bool:
        """Whether the episode ends at this fresh observation, setting ``report.success``: by the
        classifier (the simulator's flag kept as ``sim_success``), else by the simulator's status."""
        if self.classifier is not None:
            judgement = self.classifier.judge(obs, self.period_s)
            if judgement.sim_success is not None:
                report.sim_success = bool(report.sim_success) or judgement.sim_success
            if judgement.success:
                report.success = True
            return judgement.success
        if self.sim is None:
            return False
        status = self.sim.status_at(obs.joint_state_stamp_s, self.period_s)
        if status is not None and status.done:
            report.success = bool(status.success)
            return True
        return False

    def _step(self, obs: RobotObservation, report: EpisodeReport, fresh: bool) -> None:
        policy_obs = self.build_obs(obs)
        if report.steps == 0:
            absent = missing_keys(self.obs_keys, policy_obs)
            if absent:
                raise RobotError(f"the policy reads {absent}, which the robot does not report")
        if obs.extras.get("unsynced_cameras"):
            report.unsynced_steps += 1
        self.intervention.observe(obs, self._proposed)
        teleop = self.intervention.poll()
        action = None
        if teleop is not None:
            report.interventions += 1
            command: JointCommand | None = JointCommand(teleop.arm_qpos_rad, teleop.gripper_opening_m)
        elif not fresh or obs.extras.get("unsynced_cameras"):
            command = None
        else:
            action = self._policy_action(policy_obs, report)
            command = None if action is None else self.to_command(action, obs, obs.joint_state_stamp_s)
        if command is not None:
            command.stamp_s = obs.joint_state_stamp_s
        self._proposed = command.copy() if command is not None and teleop is None else None
        decision = self.robot.apply(command, obs)
        sent = decision.command
        self.result.obs_to_command_s.append(self.robot.now_s() - obs.joint_state_stamp_s)
        report.held_steps += int(decision.held)
        report.steps += 1
        if self.recorder is not None:
            self.recorder.add_frame(
                proprio=policy_obs["proprio"],
                images={c: obs.images[c] for c in self.recorder.cameras},
                policy_action=action,
                sent=sent,
                measured_arm_qpos_rad=obs.arm_qpos_rad,
                safety_events=decision.events,
                held=decision.held,
                intervention=teleop is not None,
                privileged=policy_obs.get("privileged"),
                unsynced_cameras=obs.extras.get("unsynced_cameras", ()),
            )

    def _policy_action(self, policy_obs: dict[str, Any], report: EpisodeReport) -> np.ndarray | None:
        step = report.steps
        if self.queue is not None and self.chunker is not None:
            if step == 0:
                # An episode's first chunk is waited for (up to the policy timeout): nothing is
                # queued yet, and starting a period late beats holding one for nothing.
                self.chunker.request(policy_obs, step)
                self.chunker.wait_idle(self.cfg.policy.timeout_s)
            else:
                self.chunker.observe(policy_obs, step)
            action = self.queue.pop(step)
        else:
            try:
                action = np.asarray(self.infer(policy_obs))[0]
            except Exception as error:  # server down, timeout, bad reply: hold, report, go on
                log.warning("policy failed at step %d: %s", step, error)
                action = None
        if action is None:
            report.policy_failures += 1
        return action
