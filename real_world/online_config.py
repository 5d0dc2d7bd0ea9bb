"""``configs/learn_online.yaml`` as typed dataclasses: what ``vla-rl learn-online`` reads.

One file describes a whole on-robot session: the off-policy learner (its ``configs/off_policy.yaml``
overrides, and the address its actors reach it at) and the actors beside the robots (robot, safety
layer, who may take over, what ends an episode, how the scene is reset). Everything is validated,
the learner's overrides included, before any process starts or anything moves.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from vla_rl.real_world.deploy_config import (
    CLASSIFIER_CHECKS,
    ROBOT_IMAGE_CHECKS,
    DeployConfig,
    InterventionSection,
    RecordingSection,
    RobotSection,
    SuccessSection,
    deployment_env,
)
from vla_rl.real_world.safety_config import SafetyConfig

from vla_rl.config.structured import (
    Check,
    ConfigError,
    compose_config_module,
    in_unit_interval,
    not_negative,
    one_of,
    positive,
    validate_structured,
)
from vla_rl.envs.config import EnvConfig

SUCCESS_KINDS = ("sim", "classifier", "keyboard")
RESET_KINDS = ("sim", "pose", "person")
ONLINE_INTERVENTION_KINDS = ("none", "expert", "device")
ON_LEARNER_LOST = ("keep", "hold")
LEARNER_OWNED_KEYS = ("source", "remote.host", "remote.port", "remote.token", "run_dir", "resume")
"""Off-policy keys that ``learner.*`` sets; the learner's overrides may not set them."""


@dataclass
class LearnerSection:
    """The off-policy learner (``vla-rl train ... source=remote``) and where actors reach it."""

    overrides: list[str] = field(default_factory=lambda: ["algorithm=rlpd", "env=reach", "env.num_envs=1"])
    """``configs/off_policy.yaml`` overrides of the learner (Hydra syntax). Actors build the same env
    (task, control mode, rate) and actor network from them. ``env.num_envs`` must be 1 (one robot
    step is one transition)."""
    host: str = "127.0.0.1"
    """Address the actors connect to (the GPU box's, seen from the robot's machine)."""
    bind_host: str = "127.0.0.1"
    """Address the learner binds: ``0.0.0.0`` to serve actors on other machines (then ``token``)."""
    port: int = 5600
    """TCP port of the learner server (> 0: the actors must know it)."""
    token: str | None = None
    """Shared secret of learner and actors; required when ``bind_host`` is not loopback. It is also
    written into the learner run's ``config.yaml``."""
    run_dir: str = "runs/learn_online/learner"
    """The learner's run folder (checkpoints with the replay buffer)."""
    resume: str | None = None
    """A learner run or checkpoint folder to continue exactly (its replay included); null: start anew."""


@dataclass
class ResetSection:
    """What happens between two episodes."""

    kind: str = "sim"
    """``sim``: the simulated robot starts the next episode from a seed; ``pose``: the arm drives to
    ``home_arm_qpos_rad`` through the safety layer; ``person``: the actor waits until a person says
    the scene is reset (Enter on the actor's terminal, or a message on ``person_topic``)."""
    home_arm_qpos_rad: list[float] | None = None
    """``pose``: joint targets of the home pose (rad); null: the robot description's home."""
    home_gripper_opening_m: float = 0.08
    """``pose``: finger distance at home (m)."""
    max_joint_step_rad: float = 0.04
    """``pose``: largest change of any joint target per control period on the way home (rad)
    (the safety layer's speed limit applies on top)."""
    tolerance_rad: float = 0.02
    """``pose``: home is reached when every joint is this close (rad)."""
    max_periods: int = 400
    """``pose``: give up (a warning; the episode starts anyway) after this many control periods."""
    person_topic: str = ""
    """``person``: a ROS 1 topic (std_msgs/Empty) that says the scene is reset; empty: Enter on the
    actor's terminal."""
    person_timeout_s: float = 0.0
    """``person``: stop the session when nobody confirms within this (s); <= 0: wait for ever."""


@dataclass
class TakeoverDeviceSection:
    """``intervention.kind: device``: a keyboard, gamepad or SpaceMouse read through evdev."""

    path: str = ""
    """Input device (``/dev/input/eventN``; ``python -m evdev.evtest`` lists them)."""
    hold_key: str = "BTN_0"
    """evdev key name held down while the person drives (e.g. ``KEY_SPACE``, ``BTN_SOUTH``, ``BTN_0``
    for a SpaceMouse's left button)."""
    axes: list[str] = field(default_factory=lambda: ["ABS_X", "ABS_Y", "ABS_Z"])
    """evdev axes read as the TCP's x, y, z motion (a SpaceMouse's translation, a gamepad's sticks)."""
    gripper_key: str = "BTN_1"
    """Key that toggles the gripper between open and closed while driving."""
    max_ee_step_m: float = 0.01
    """TCP step (m per control period) at full deflection of an axis."""


@dataclass
class LearnOnlineConfig:
    learner: LearnerSection = field(default_factory=LearnerSection)
    actors: int = 1
    """Actor processes ``learn-online`` starts (each with its own robot; in rehearsals, its own
    roscore and simulated robot)."""
    robot: RobotSection = field(default_factory=RobotSection)
    """How each actor reaches its robot (``configs/deploy.yaml``'s section)."""
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    """Every command of the actor (policy, takeover, reset) passes this safety layer."""
    intervention: InterventionSection = field(default_factory=InterventionSection)
    """Who may take over: ``none`` (the robot's teleoperation topics), ``expert`` (the scripted expert,
    rehearsals) or ``device`` (``takeover_device``). Takeover steps reach the learner with the
    intervention flag, their action the takeover's label in the policy's units."""
    takeover_device: TakeoverDeviceSection = field(default_factory=TakeoverDeviceSection)
    success: SuccessSection = field(default_factory=SuccessSection)
    reset: ResetSection = field(default_factory=ResetSection)
    recording: RecordingSection = field(default_factory=RecordingSection)
    """Record every step (``DeploymentRecorder``) under ``<output_dir>/actor_<i>/dataset``."""
    episodes: int = 10
    """Episodes each actor runs."""
    max_steps: int = 0
    """Control periods per episode before it is truncated; 0: the simulated robot's time limit."""
    seed: int = 1000
    """Episode ``k`` of actor ``i`` on a simulated robot starts from seed ``seed + 1000 * i + k``."""
    control_hz: float = 0.0
    """Control rate (Hz); <= 0: the learner env's rate."""
    deterministic: bool = False
    """Act with the actor's mean action instead of sampling (no exploration)."""
    first_weights_timeout_s: float = 300.0
    """An actor that has had no weights from the learner for this long gives up (s); <= 0: waits for
    ever. It sends no motion command while it waits."""
    on_learner_lost: str = "keep"
    """Once it had weights and the learner stops answering: ``keep`` acting with the last weights
    (transitions wait in a queue), or ``hold`` the arm (through the safety layer) until it answers."""
    learner_lost_after_s: float = 2.0
    """``hold``: the learner counts as lost after this long without an answer (s)."""
    output_dir: str = "runs/learn_online"
    """Logs, each actor's ``actor_<i>/online_summary.json`` and ``learn_online.json``."""


def _learner_override_check(cfg: LearnOnlineConfig) -> bool:
    return not any(o.partition("=")[0].lstrip("+~") in LEARNER_OWNED_KEYS for o in cfg.learner.overrides)


def _is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


LEARN_ONLINE_CHECKS: tuple[Check[LearnOnlineConfig], ...] = (
    Check(
        "learner.overrides",
        _learner_override_check,
        f"may not set {', '.join(LEARNER_OWNED_KEYS)}: learner.* sets them",
    ),
    *positive("learner.port", "actors", "episodes", "success.consecutive_steps", "reset.max_periods"),
    *positive("reset.max_joint_step_rad", "reset.tolerance_rad", "learner_lost_after_s"),
    *positive("takeover_device.max_ee_step_m"),
    *not_negative("max_steps", "reset.home_gripper_opening_m"),
    Check(
        "learner.token",
        lambda c: _is_loopback(c.learner.bind_host) or bool(c.learner.token),
        "is required when learner.bind_host is not loopback",
    ),
    one_of("robot.transport", ("ros1", "ros2")),
    *ROBOT_IMAGE_CHECKS,
    one_of("success.kind", SUCCESS_KINDS),
    one_of("reset.kind", RESET_KINDS),
    one_of("intervention.kind", ONLINE_INTERVENTION_KINDS),
    one_of("on_learner_lost", ON_LEARNER_LOST),
    in_unit_interval("success.threshold", open_low=True),
    in_unit_interval("intervention.takeover_probability", open_low=True),
    in_unit_interval("intervention.watch_probability", open_low=True),
    *positive("intervention.drift_window", "intervention.takeover_steps"),
    *CLASSIFIER_CHECKS,
    Check(
        "success.kind",
        lambda c: c.success.kind != "sim" or c.robot.simulated,
        "sim needs robot.simulated=true (a real robot has no success flag: use classifier or keyboard)",
    ),
    Check(
        "reset.kind",
        lambda c: c.reset.kind != "sim" or c.robot.simulated,
        "sim needs robot.simulated=true (a real scene is reset by a pose or a person)",
    ),
    Check(
        "reset.home_arm_qpos_rad",
        lambda c: c.reset.home_arm_qpos_rad is None or len(c.reset.home_arm_qpos_rad) == 7,
        "must hold 7 joint angles (rad)",
    ),
    Check(
        "reset.person_topic",
        lambda c: not c.reset.person_topic or c.robot.transport == "ros1",
        "is read over ROS 1 only (robot.transport=ros1)",
    ),
    Check(
        "intervention.kind",
        lambda c: c.intervention.kind != "expert" or c.robot.simulated,
        "expert needs robot.simulated=true: the scripted expert reads the simulator's task state",
    ),
    Check(
        "takeover_device.path",
        lambda c: c.intervention.kind != "device" or bool(c.takeover_device.path),
        "must name the input device (/dev/input/eventN) when intervention.kind is device",
    ),
    Check(
        "max_steps",
        lambda c: c.robot.simulated or c.max_steps > 0,
        "must be > 0 on a real robot (robot.simulated=false): a time limit must end episodes",
    ),
    Check(
        "max_steps",
        lambda c: c.success.kind == "sim" or c.max_steps > 0,
        "must be > 0 unless success.kind is sim: a classifier or a person may never end an episode",
    ),
    Check(
        "robot.command_type",
        lambda c: not c.robot.simulated or c.robot.command_type == "joint_trajectory",
        "must be joint_trajectory with robot.simulated=true (vla-rl sim-robot takes JointTrajectory only)",
    ),
)


def compose_learn_online_config(overrides: list[str]) -> LearnOnlineConfig:
    """``configs/learn_online.yaml`` with Hydra-syntax ``overrides``, validated (not the learner's
    own overrides: :func:`learner_config` checks those)."""
    raw = compose_config_module("learn_online", overrides)
    config = validate_structured(LearnOnlineConfig, raw, LEARN_ONLINE_CHECKS)
    try:
        config.safety.validate()
    except ValueError as error:
        raise ConfigError(f"config key 'safety': {error}") from None
    return config


def learner_overrides(cfg: LearnOnlineConfig) -> list[str]:
    """The learner's ``vla-rl train`` overrides: ``learner.overrides`` plus the remote source on
    ``learner.bind_host:port`` (a resumed run keeps its own config; these go on top)."""
    learner = cfg.learner
    token = [f"remote.token={learner.token}"] if learner.token else []
    own = ["source=remote", f"remote.host={learner.bind_host}", f"remote.port={learner.port}", *token]
    if learner.resume:
        return [*learner.overrides, *own, f"resume={learner.resume}"]
    return [*learner.overrides, *own, f"run_dir={learner.run_dir}"]


def learner_config(cfg: LearnOnlineConfig) -> Any:  # noqa: ANN401 - OffPolicyConfig, imported lazily
    """The learner's validated ``OffPolicyConfig``; a ``ConfigError`` names ``learner.overrides``
    when it cannot drive a robot actor."""
    from vla_rl.training.jobs import job_config

    try:
        off = job_config("off_policy", learner_overrides(cfg))
    except ConfigError as error:
        raise ConfigError(f"config key 'learner.overrides': {error}") from None
    if off.env.num_envs != 1:
        raise ConfigError(
            f"config key 'learner.overrides': env.num_envs must be 1 (one robot step is one transition), "
            f"got {off.env.num_envs}"
        )
    return off


def actor_env(cfg: LearnOnlineConfig, env: EnvConfig) -> EnvConfig:
    """The learner's env as one robot runs it: one world, on the CPU, at ``control_hz``, with the
    cameras the success classifier reads added to the ones the env has (``deployment_env``)."""
    env = dataclasses.replace(env, num_envs=1, pipeline_stages=1, device="cpu")
    return deployment_env(as_deploy_config(cfg), env)


def as_deploy_config(cfg: LearnOnlineConfig, actor_index: int = 0) -> DeployConfig:
    """The deployment settings of actor ``actor_index`` (what the robot, sim and intervention
    builders of ``vla-rl deploy`` take); its expert draws its own stream."""
    intervention = dataclasses.replace(cfg.intervention, seed=cfg.intervention.seed + actor_index)
    if intervention.kind == "device":
        intervention = dataclasses.replace(intervention, kind="none")
    return DeployConfig(
        robot=cfg.robot,
        safety=cfg.safety,
        intervention=intervention,
        success=cfg.success,
        recording=cfg.recording,
        episodes=cfg.episodes,
        seed=cfg.seed + 1000 * actor_index,
        max_steps=cfg.max_steps,
        control_hz=cfg.control_hz,
        output_dir=cfg.output_dir,
    )
