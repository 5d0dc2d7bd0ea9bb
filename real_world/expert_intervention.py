"""A scripted stand-in for the person who takes over in a deployment rehearsal (HG-DAgger's expert).

``ExpertIntervention`` holds the task's scripted expert (``vla_rl.sims.tasks.scripted``), which reads
the task state the simulated robot publishes (``RobotObservation.task_state``, the simulator's
privileged observation). It watches the policy drive the arm and takes over when it drifts:

* each step it works out what the expert would command from the step's observation (an
  ``ee_delta_pos`` action: TCP displacement / ``max_ee_step_m`` and a gripper command, each in [-1, 1]);
* the policy's command of that step, before the safety layer, is expressed in the same units
  (``command_to_action`` in ``ee_delta_pos``: the TCP motion the joint target asks for, whatever the
  policy's own control mode);
* drift = the mean, over the last ``drift_window`` steps the policy drove, of the Euclidean distance
  between the two 4-vectors (0 when the policy does what the expert would; at most 4);
* once the window is full and drift exceeds ``drift_threshold`` (the deploy config's
  ``intervention`` section, ``InterventionSection``), a takeover starts with probability
  ``takeover_probability`` per step (a watcher who is slow to react): for ``takeover_steps`` steps
  ``poll`` returns the expert's joint command, which the deployment loop sends through the safety
  layer and records with the intervention flag, exactly as a person's. The window then starts empty:
  the policy gets ``drift_window`` fresh steps before it can be judged again;
* it watches an episode at all with probability ``watch_probability``, drawn as the episode starts
  (``reset``) from its own stream; an episode it does not watch is the policy's alone.

The expert's command is its action turned into a joint target by the ``ee_delta_pos`` controller
from the measured pose (the simulator's controller and settings), as the simulated env would do.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import torch
from vla_rl.real_world.action_labels import command_to_action, gripper_opening
from vla_rl.real_world.deploy_config import DeployConfig, InterventionSection
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.policy_runner import ObservationBuilder
from vla_rl.real_world.robot import InterventionInput, JointCommand, Robot, RobotError, RobotObservation
from vla_rl.robots.controllers import ControllerSettings, make_controller
from vla_rl.robots.panda import PANDA
from vla_rl.sims.tasks.scripted import SCRIPTED_POLICIES, scripted_action

from vla_rl.config import ConfigError
from vla_rl.envs.config import EnvConfig

EXPERT_CONTROL_MODE = "ee_delta_pos"
"""The scripted experts act in this mode; drift is measured in its units."""


class ExpertIntervention(InterventionInput):
    """The task's scripted expert as an intervention input (see the module docstring)."""

    def __init__(
        self,
        task: str,
        settings: InterventionSection | None = None,
        controller: ControllerSettings | None = None,
        kinematics: ArmKinematics | None = None,
    ) -> None:
        if task not in SCRIPTED_POLICIES:
            raise ValueError(f"no scripted expert for task {task!r}; known: {sorted(SCRIPTED_POLICIES)}")
        self.task = task
        self.settings = settings or InterventionSection(kind="expert")
        self.controller_settings = controller or ControllerSettings()
        self.kinematics = kinematics or ArmKinematics()
        self.controller = make_controller(EXPERT_CONTROL_MODE, PANDA, self.controller_settings)
        self.build_obs = ObservationBuilder(self.kinematics)
        self.total_steps = 0
        """Steps the expert drove, over all episodes."""
        self.takeovers = 0
        """Takeovers started, over all episodes."""
        self.drift_log: list[float] = []
        """The drift of every step it was judged, over all episodes (for calibrating the threshold)."""
        self.rng = np.random.default_rng(self.settings.seed)
        self.watch_rng = np.random.default_rng([self.settings.seed, 1])
        self.reset()

    def reset(self) -> None:
        self.watching = bool(self.watch_rng.random() < self.settings.watch_probability)
        self.distances: deque[float] = deque(maxlen=self.settings.drift_window)
        self.remaining = 0
        self._current: RobotObservation | None = None
        self._expert_action: np.ndarray | None = None

    def expert_action(self, observation: RobotObservation) -> np.ndarray:
        """The expert's ``ee_delta_pos`` action [4] (float32) for ``observation``."""
        if observation.task_state is None:
            raise RobotError("the expert intervener reads the task state, which the robot does not report")
        policy_obs = self.build_obs(observation)
        batch = {
            "proprio": torch.as_tensor(policy_obs["proprio"])[None],
            "privileged": torch.as_tensor(policy_obs["privileged"])[None],
        }
        return scripted_action(self.task, batch, self.controller_settings.max_ee_step_m)[0].numpy()

    def expert_command(self, observation: RobotObservation, action: np.ndarray) -> JointCommand:
        """``action`` as a joint target from the measured pose (the simulator's controller)."""
        state = self.kinematics.robot_state(observation.arm_qpos_rad)
        arm, _ = self.controller(np.asarray(action, np.float64)[None], state)
        return JointCommand(arm[0], gripper_opening(float(action[-1])), observation.joint_state_stamp_s)

    def observe(self, observation: RobotObservation, proposed: JointCommand | None) -> None:
        """The step's observation and the command the policy proposed in the previous step (before
        the safety layer; None when it drove nothing: the expert drove, or the policy failed)."""
        previous, previous_action = self._current, self._expert_action
        if proposed is not None and previous is not None and previous_action is not None:
            policy_action = command_to_action(
                proposed,
                previous.arm_qpos_rad,
                EXPERT_CONTROL_MODE,
                self.kinematics,
                self.controller_settings,
            )
            self.distances.append(float(np.linalg.norm(policy_action - previous_action)))
        self._current = observation
        self._expert_action = self.expert_action(observation)

    @property
    def drift(self) -> float | None:
        """Mean distance over the window; None until the window is full."""
        if len(self.distances) < self.settings.drift_window:
            return None
        return float(np.mean(self.distances))

    def poll(self) -> JointCommand | None:
        if self._current is None or self._expert_action is None:
            raise RuntimeError("observe the step's observation before polling the expert")
        drift = self.drift if self.remaining == 0 and self.watching else None
        settings = self.settings
        if drift is not None:
            self.drift_log.append(drift)
            if drift > settings.drift_threshold and self.rng.random() < settings.takeover_probability:
                self.remaining = settings.takeover_steps
                self.takeovers += 1
                self.distances.clear()
        if self.remaining == 0:
            return None
        self.remaining -= 1
        self.total_steps += 1
        return self.expert_command(self._current, self._expert_action)


def intervention_input(cfg: DeployConfig, env: EnvConfig, robot: Robot) -> InterventionInput | None:
    """What may take over in this deployment (``cfg.intervention.kind``): the scripted expert of the
    policy's task, or the robot's teleoperation override."""
    if cfg.intervention.kind != "expert":
        return robot.teleop_input()
    if env.task not in SCRIPTED_POLICIES or env.backend != "mujoco":
        raise ConfigError(
            f"config key 'intervention.kind': no scripted expert for task {env.task!r} "
            f"(known: {', '.join(sorted(SCRIPTED_POLICIES))})"
        )
    controller = ControllerSettings(**env.options.get("controller", {}))
    return ExpertIntervention(env.task, cfg.intervention, controller)
