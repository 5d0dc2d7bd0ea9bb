"""``configs/deploy.yaml`` as typed dataclasses: what ``vla-rl deploy``, ``vla-rl sim-robot`` and
``vla-rl policy-server`` read. Validated (unknown keys, wrong types, bad values) before anything
connects or moves."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from vla_rl.real_world.camera_view import is_crop_region
from vla_rl.real_world.safety_config import SafetyConfig
from vla_rl.real_world.topics import IMAGE_TRANSPORTS, RobotTopics

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
from vla_rl.data.lerobot_format import DATASET_WRITERS
from vla_rl.envs.config import EnvConfig

TRANSPORTS = ("ros1", "ros2")
COMMAND_TYPES = ("joint_trajectory", "float64_multi_array", "pose_stamped")
MERGE_MODES = ("latest", "ensemble")
INTERVENTION_KINDS = ("none", "expert")
DEPLOY_SUCCESS_KINDS = ("sim", "classifier")
"""``success.kind`` of ``vla-rl deploy`` (``vla-rl learn-online`` also takes ``keyboard``)."""


@dataclass
class RobotSection:
    """How the robot is reached."""

    transport: str = "ros1"
    """``ros1`` (rospy) or ``ros2`` (rclpy where installed, else DDS from Python)."""
    topics: RobotTopics = field(default_factory=RobotTopics)
    simulated: bool = True
    """The robot is ``vla-rl sim-robot``: episodes start from seeds and the simulator reports success.
    False on a real robot: each episode runs ``max_steps`` periods from wherever the arm is."""
    sync_slop_s: float = 0.02
    """Images belong to a joint state when their stamps differ by at most this (s)."""
    image_wait_s: float = 0.025
    """After a new joint state, wait up to this long (s) for the camera frames that belong to it (they
    often arrive later). A period whose frames have not come by then gives no command. Keep it well
    under the control period: it adds to the observation-to-command latency when frames lag."""
    connect_timeout_s: float = 10.0
    """Give up when no joint state arrives within this (s)."""
    image_transport: str = "raw"
    """``raw``: sensor_msgs/Image on ``topics.image``; ``compressed``: jpeg or png
    sensor_msgs/CompressedImage on that topic + ``/compressed`` (image_transport's republisher),
    decoded on the robot side. The simulated robot publishes what this names (jpeg, quality 90)."""
    command_type: str = "joint_trajectory"
    """What ``topics.command`` carries: ``joint_trajectory`` (trajectory_msgs/JointTrajectory),
    ``float64_multi_array`` (std_msgs/Float64MultiArray of the 7 joint targets, for a
    forward_command_controller) or ``pose_stamped`` (geometry_msgs/PoseStamped: the TCP pose of the
    checked joint target by forward kinematics, for a Cartesian impedance controller such as
    franka_ros's ``equilibrium_pose``). The simulated robot takes joint_trajectory only."""
    pose_frame_id: str = "panda_link0"
    """``header.frame_id`` of ``pose_stamped`` commands: the arm's base frame (the model's ``link0``,
    franka_ros's ``panda_link0``)."""
    image_crops: dict[str, list[int]] = field(default_factory=dict)
    """Per camera, the region ``[top, left, height, width]`` (pixels of the frame the camera publishes)
    the policy sees. Every frame is then resized to the policy's image size (bilinear); a frame of
    another size without a crop is resized whole, and the aspect ratio may change (logged once)."""
    sim_image_size: int = 0
    """``vla-rl sim-robot`` only: its cameras publish frames of this many pixels a side, the same view
    as the policy's; 0: the policy's image size. A larger size rehearses a real camera, whose frames
    the robot side crops (``image_crops``) and resizes to the policy's size."""
    sim_image_width: int = 0
    """``vla-rl sim-robot`` only: the width of its frames (pixels; their height is ``sim_image_size``,
    else the policy's); 0: square. The view keeps its height and widens at the sides, as a 4:3 or
    16:9 camera's does, so the square at the centre is the policy's view: a crop of it
    (``image_crops``) rehearses the crop a real camera needs."""


@dataclass
class PolicySource:
    """Where the policy runs."""

    mode: str = "local"
    """``local``: in this process; ``remote``: a ``vla-rl policy-server`` at ``host:port``."""
    host: str = "127.0.0.1"
    port: int = 5555
    """Port of the policy server (``vla-rl policy-server`` binds it)."""
    token: str | None = None
    """Shared secret; required by the server when it binds anything but loopback."""
    timeout_s: float = 0.5
    """A request that takes longer fails (the robot holds)."""


@dataclass
class ActionQueueSection:
    """Asynchronous chunked inference: keep a queue of actions and refill it in the background."""

    enabled: bool = False
    """False: one (blocking) inference per control period from that period's observation."""
    merge: str = "latest"
    """Overlapping chunks: ``latest`` (newest chunk wins) or ``ensemble`` (temporal ensembling)."""
    refill_threshold: int = 1
    """Ask for a new chunk when fewer actions than this are left."""
    ensemble_decay: float = 0.01
    """Weight exp(-decay * i) of the i-th oldest prediction of a step (``ensemble`` only)."""


@dataclass
class RecordingSection:
    enabled: bool = False
    """Record every episode (observations, sent commands, safety events, interventions) as LeRobot data."""
    root: str | None = None
    """Dataset folder; null: ``<output_dir>/dataset``."""
    cameras: list[str] | None = None
    """Cameras recorded; null: the policy's own (not the success classifier's, so the recording mixes
    with the policy's training data). A camera named here that the policy's env lacks is added to what
    the robot reports, as the classifier's are."""
    codebase_version: str = ""
    """LeRobot dataset version of a new recording (``v3.0``, ``v2.1``); empty: the library's default
    (``v3.0``) for a new folder, the folder's own version when recordings are added to an existing one."""
    finalize_every_episodes: int = 1
    """v3.0: finish the open data and video files and rewrite the meta files every this many episodes (a
    crash of the process loses at most the episodes since; each finalise starts new files). 1: every
    robot episode is on disk as soon as it ends; 0: only at the end of the session."""


@dataclass
class InterventionSection:
    """Who may take over from the policy (see ``vla_rl.real_world.expert_intervention``)."""

    kind: str = "none"
    """``none``: the robot's teleoperation override (the ``teleop_*`` topics), if a person uses it;
    ``expert``: the task's scripted expert takes over when the policy drifts from it (rehearsals on
    the simulated robot, whose task state it reads; the teleoperation topics are then ignored)."""
    drift_threshold: float = 0.5
    """``expert``: the expert takes over when the mean distance between the policy's commands and its
    own over the last ``drift_window`` policy steps exceeds this, in normalised ``ee_delta_pos``
    units (TCP step / ``max_ee_step_m`` and the gripper command, each in [-1, 1]; at most 4);
    < 0 takes over as soon as the window is full."""
    drift_window: int = 5
    """``expert``: policy steps the drift is averaged over; none is judged before this many."""
    takeover_steps: int = 20
    """``expert``: steps the expert drives once it took over, before handing back to the policy."""
    takeover_probability: float = 1.0
    """``expert``: chance per step that a detected drift starts a takeover (1: at once; smaller: a
    slower watcher; the check repeats on each later step while the drift lasts)."""
    watch_probability: float = 1.0
    """``expert``: chance that the expert watches an episode at all, drawn as the episode starts (1:
    every episode; smaller: a person who attends to some episodes and leaves the rest to the policy)."""
    seed: int = 0
    """``expert``: seed of the takeover and watching draws (two streams for the whole deployment)."""


@dataclass
class SuccessSection:
    """What ends an episode as a success (``vla-rl learn-online``: with the sparse reward, 1 on the step
    that reached success, else 0)."""

    kind: str = "sim"
    """``sim``: the simulated robot's own success flag (rehearsals; ``vla-rl deploy`` on a real robot:
    nothing judges success); ``classifier``: the learned success model of ``vla-rl reward-train`` at
    ``classifier_path`` (beside a simulated robot the simulator's flag is still recorded, as
    ``sim_success``, and decides nothing); ``keyboard`` (``vla-rl learn-online`` only): a person types
    ``s`` + Enter (success) or ``f`` + Enter (failure: the episode ends, truncated) on the actor's
    terminal."""
    classifier_path: str = ""
    """``classifier``: a ``vla-rl reward-train`` output folder (``reward_model.json``)."""
    threshold: float = 0.5
    """``classifier``: success once the success probability reaches this."""
    consecutive_steps: int = 1
    """``classifier``: ... on this many steps in a row (guards against one lucky frame)."""
    instruction: str = ""
    """``classifier``: the instruction the success model is asked about (the one it was trained on;
    required)."""


@dataclass
class DeployConfig:
    checkpoint: str | None = None
    """A ``vla-rl train`` run or checkpoint folder (the policy, and its task and controller settings)."""
    robot: RobotSection = field(default_factory=RobotSection)
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    policy: PolicySource = field(default_factory=PolicySource)
    action_queue: ActionQueueSection = field(default_factory=ActionQueueSection)
    recording: RecordingSection = field(default_factory=RecordingSection)
    intervention: InterventionSection = field(default_factory=InterventionSection)
    success: SuccessSection = field(default_factory=SuccessSection)
    episodes: int = 10
    """Episodes to run."""
    seed: int = 1000
    """Episode ``i`` of a simulated robot starts from seed ``seed + i`` (as ``vla-rl eval`` would)."""
    max_steps: int = 0
    """Control periods per episode; 0: the task's episode length."""
    control_hz: float = 0.0
    """Control rate of the robot and the policy (Hz); <= 0: the rate the policy was trained at."""
    instruction: str | None = None
    """Language instruction for language-conditioned policies; null: the task's default."""
    output_dir: str = "runs/deploy"
    """Summary (``deploy_summary.json``) and recordings."""
    sim_seconds: float = 0.0
    """``vla-rl sim-robot`` only: stop after this long (s); <= 0 runs until interrupted."""
    sim_stats_path: str | None = None
    """``vla-rl sim-robot`` only: write command latencies here (JSON) after each episode."""


CLASSIFIER_CHECKS: tuple[Check, ...] = (
    Check(
        "success.classifier_path",
        lambda c: c.success.kind != "classifier" or bool(c.success.classifier_path),
        "must name a `vla-rl reward-train` output when success.kind is classifier",
    ),
    Check(
        "success.instruction",
        lambda c: c.success.kind != "classifier" or bool(c.success.instruction.strip()),
        "must be the instruction the success classifier was trained with (success.kind=classifier)",
    ),
)
"""A ``success.kind=classifier`` section's own checks (``vla-rl deploy`` and ``vla-rl learn-online``)."""

ROBOT_IMAGE_CHECKS: tuple[Check[Any], ...] = (
    one_of("robot.image_transport", IMAGE_TRANSPORTS),
    Check(
        "robot.image_crops",
        lambda c: all(is_crop_region(crop) for crop in c.robot.image_crops.values()),
        "must map each camera to [top, left, height, width] with top, left >= 0 and height, width > 0",
    ),
    *not_negative("robot.sync_slop_s", "robot.image_wait_s", "robot.sim_image_size", "robot.sim_image_width"),
)
"""How frames travel, the crops' shape (which cameras exist is known once the policy's env is:
``transports``), the frames' synchronisation and the simulated cameras' size (``vla-rl deploy`` and
``vla-rl learn-online``)."""

DEPLOY_CHECKS: tuple[Check[DeployConfig], ...] = (
    one_of("robot.transport", TRANSPORTS),
    one_of("policy.mode", ("local", "remote")),
    *positive("policy.timeout_s"),
    one_of("action_queue.merge", MERGE_MODES),
    *positive("action_queue.refill_threshold", "episodes"),
    *not_negative("max_steps", "recording.finalize_every_episodes"),
    one_of("robot.command_type", COMMAND_TYPES),
    *ROBOT_IMAGE_CHECKS,
    one_of("recording.codebase_version", ("", *DATASET_WRITERS)),
    one_of("intervention.kind", INTERVENTION_KINDS),
    *positive("intervention.drift_window", "intervention.takeover_steps"),
    in_unit_interval("intervention.takeover_probability", open_low=True),
    in_unit_interval("intervention.watch_probability", open_low=True),
    Check(
        "intervention.kind",
        lambda c: c.intervention.kind != "expert" or c.robot.simulated,
        "expert needs robot.simulated=true: the scripted expert reads the simulator's task state",
    ),
    Check(
        "robot.command_type",
        lambda c: not c.robot.simulated or c.robot.command_type == "joint_trajectory",
        "must be joint_trajectory with robot.simulated=true (vla-rl sim-robot takes JointTrajectory only)",
    ),
    Check(
        "robot.pose_frame_id",
        lambda c: c.robot.command_type != "pose_stamped" or bool(c.robot.pose_frame_id),
        "must name the arm's base frame when robot.command_type is pose_stamped",
    ),
    Check(
        "max_steps",
        lambda c: c.robot.simulated or c.max_steps > 0,
        "must be > 0 on a real robot (robot.simulated=false): nothing else ends an episode",
    ),
    one_of("success.kind", DEPLOY_SUCCESS_KINDS),
    *positive("success.consecutive_steps"),
    in_unit_interval("success.threshold", open_low=True),
    *CLASSIFIER_CHECKS,
    Check(
        "max_steps",
        lambda c: c.success.kind != "classifier" or c.max_steps > 0,
        "must be > 0 when success.kind is classifier: the classifier may never end an episode",
    ),
)


def deployment_env(cfg: DeployConfig, env: EnvConfig) -> EnvConfig:
    """The policy's training environment with this deployment's overrides: the control rate, and the
    cameras the success classifier reads and the recording keeps added to the ones the env has."""
    if cfg.control_hz > 0:
        env = dataclasses.replace(env, control_hz=cfg.control_hz)
    wanted = classifier_cameras(cfg.success.classifier_path) if cfg.success.kind == "classifier" else []
    if cfg.recording.enabled and cfg.recording.cameras:
        wanted += cfg.recording.cameras
    extra = list(dict.fromkeys(c for c in wanted if c not in env.cameras))
    return dataclasses.replace(env, cameras=[*env.cameras, *extra]) if extra else env


def classifier_cameras(path: str) -> list[str]:
    """The cameras a saved learned success model reads (from its ``reward_model.json``)."""
    from pathlib import Path

    from vla_rl.data.lerobot_layout import read_json
    from vla_rl.rewards.learned import CONFIG_FILE

    file = Path(path) / CONFIG_FILE
    if not file.is_file():
        raise ConfigError(
            f"config key 'success.classifier_path': {path} holds no {CONFIG_FILE} "
            "(train one with `vla-rl reward-train`)"
        )
    return list(read_json(file).get("cameras", []))


def compose_deploy_config(overrides: list[str]) -> DeployConfig:
    """``configs/deploy.yaml`` with Hydra-syntax ``overrides``, validated."""
    config = validate_structured(DeployConfig, compose_config_module("deploy", overrides), DEPLOY_CHECKS)
    try:
        config.safety.validate()
    except ValueError as error:
        raise ConfigError(f"config key 'safety': {error}") from None
    return config
