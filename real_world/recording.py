"""Record real-robot deployment episodes as LeRobot datasets (v3.0 or v2.1), for later SFT or RL.

Each control step becomes one frame: the policy's observation (``observation.state``,
``observation.privileged`` when given, camera videos), the normalised action in force
(``action``) and these per-step extras, stored as ordinary parquet columns by the dataset writer:

* ``command.arm_qpos_rad`` float64 [T, 7]: arm joint targets actually sent (after the safety layer).
* ``command.gripper_opening_m`` float64 [T, 1]: finger distance actually sent.
* ``safety.events`` int64 [T]: bit mask of the safety events of the step; bit ``i`` is
  ``SAFETY_EVENTS[i]`` (``decode_safety_events`` turns a mask back into names).
* ``safety.held`` bool [T]: the safety layer held the pose instead of following the policy.
* ``intervention`` bool [T]: a human (teleoperation override) replaced the policy's command.
* ``images.unsynced`` bool [T]: a recorded camera had no frame of the step's joint state (none within
  ``robot.sync_slop_s`` by the end of ``robot.image_wait_s``), so its image is an older one. SFT
  starts no sample on such a frame. A folder begun before this column existed is continued
  without it.

On intervention frames the ``action`` column is a label in the policy's own units, worked out
from the sent command and the measured pose by ``command_to_action``. The writer has no room for
dataset-level metadata, so the recorder keeps it in ``meta/deployment.json`` beside LeRobot's
meta files (other tools ignore it): the control mode, the event names in bit order, the
controller settings and the episodes whose success was not labelled (written with success False).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from vla_rl.real_world.action_labels import ARM_LABELS, command_to_action
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import InterventionInput, JointCommand
from vla_rl.robots.controllers import CONTROLLERS, ControllerSettings
from vla_rl.robots.panda import PANDA, RobotDescription

from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_format import DEFAULT_CODEBASE_VERSION, dataset_version, dataset_writer
from vla_rl.data.lerobot_layout import ACTION_KEY, INFO_PATH, atomic_write_text, read_json
from vla_rl.data.video import VideoSettings

if TYPE_CHECKING:
    from vla_rl.real_world.deploy_config import RecordingSection

    from vla_rl.envs.config import EnvConfig

SAFETY_EVENTS: tuple[str, ...] = (
    "estop",
    "stale_joint_state",
    "stale_image",
    "watchdog",
    "non_finite",
    "jump",
    "joint_limit",
    "joint_speed",
    "ee_speed",
    "workspace",
    "gripper",
    "invalid_joint_state",
    "malformed",
)
"""Safety-layer event names (``vla_rl.real_world.safety.EVENTS``, in another order); the position is
the bit of ``safety.events``. Recorded datasets depend on the order: only append to it."""

COMMAND_ARM_KEY = "command.arm_qpos_rad"
COMMAND_GRIPPER_KEY = "command.gripper_opening_m"
SAFETY_EVENTS_KEY = "safety.events"
SAFETY_HELD_KEY = "safety.held"
INTERVENTION_KEY = "intervention"
IMAGES_UNSYNCED_KEY = "images.unsynced"
EXTRA_KEYS = (
    COMMAND_ARM_KEY,
    COMMAND_GRIPPER_KEY,
    SAFETY_EVENTS_KEY,
    SAFETY_HELD_KEY,
    INTERVENTION_KEY,
    IMAGES_UNSYNCED_KEY,
)
DEPLOYMENT_META_PATH = "meta/deployment.json"

ACTION_NAMES: dict[str, list[str]] = {
    "joint_delta": [f"dq{i}" for i in range(1, 8)] + ["gripper"],
    "ee_delta_pos": ["dx", "dy", "dz", "gripper"],
    "ee_delta_pose": ["dx", "dy", "dz", "drx", "dry", "drz", "gripper"],
}


def encode_safety_events(events: Iterable[str]) -> int:
    """Bit mask of event names (unknown names raise, so a renamed counter cannot vanish silently)."""
    mask = 0
    for event in events:
        if event not in SAFETY_EVENTS:
            raise ValueError(f"unknown safety event {event!r}; known: {', '.join(SAFETY_EVENTS)}")
        mask |= 1 << SAFETY_EVENTS.index(event)
    return mask


def decode_safety_events(mask: int) -> list[str]:
    """Event names of a ``safety.events`` bit mask, in ``SAFETY_EVENTS`` order."""
    mask = int(mask)
    if mask < 0 or mask >> len(SAFETY_EVENTS):
        raise ValueError(f"safety event mask {mask:#x} has bits beyond the {len(SAFETY_EVENTS)} known events")
    return [name for bit, name in enumerate(SAFETY_EVENTS) if mask >> bit & 1]


class NoIntervention(InterventionInput):
    def poll(self) -> JointCommand | None:
        return None


class ScriptedIntervention(InterventionInput):
    """Returns ``commands[step]`` on the given steps (counted by ``poll`` calls from 0 after
    ``reset``), None on the others: for tests and rehearsals of the intervention path."""

    def __init__(self, commands: Mapping[int, JointCommand]) -> None:
        self.commands = dict(commands)
        self.step = 0

    def poll(self) -> JointCommand | None:
        command = self.commands.get(self.step)
        self.step += 1
        return command.copy() if command is not None else None

    def reset(self) -> None:
        self.step = 0


class DeploymentRecorder:
    """Buffers one deployment episode's frames and writes it through the dataset writer at its end.

    A written episode stays readable whatever happens later as long as ``finalize_every_episodes`` is
    1 (the default: the writer finishes the episode's files and meta files at once; larger values
    put that many episodes in one v3.0 data and video file, and a crash of the process loses the
    episodes since the last finalise). An episode still open at ``close`` (or when a ``with`` block is
    left by an exception, e.g. an e-stop) is written with success unlabelled rather than lost.
    ``video`` is the collect code's ``VideoSettings`` (``LOSSLESS_VIDEO`` for exact images),
    ``feature_names`` adds per-dimension names (e.g. of ``observation.state``) to the action and
    command names set here, and ``append=True`` continues an existing dataset at ``root``.
    """

    def __init__(
        self,
        root: str | Path,
        fps: float,
        control_mode: str,
        cameras: Sequence[str],
        robot_type: str = "panda",
        video: VideoSettings | None = None,
        *,
        robot: RobotDescription = PANDA,
        settings: ControllerSettings | None = None,
        kinematics: ArmKinematics | None = None,
        feature_names: dict[str, list[str]] | None = None,
        append: bool = False,
        codebase_version: str = DEFAULT_CODEBASE_VERSION,
        finalize_every_episodes: int = 1,
    ) -> None:
        if control_mode not in ARM_LABELS:
            raise ValueError(f"unknown control_mode {control_mode!r}; allowed: {', '.join(ARM_LABELS)}")
        self.root = Path(root)
        self.control_mode = control_mode
        self.action_dim = CONTROLLERS[control_mode].action_dim
        self.cameras = sorted(cameras)
        self.robot = robot
        self.settings = settings or ControllerSettings()
        self.kinematics = kinematics or ArmKinematics(robot)
        names = {ACTION_KEY: ACTION_NAMES[control_mode], COMMAND_ARM_KEY: list(robot.arm_joint_names)}
        names = {**names, COMMAND_GRIPPER_KEY: ["gripper"], **(feature_names or {})}
        self.writer = dataset_writer(
            self.root,
            fps,
            codebase_version,
            robot_type=robot_type,
            video=video,
            feature_names=names,
            append=append,
            finalize_every_episodes=finalize_every_episodes,
        )
        meta_path = self.root / DEPLOYMENT_META_PATH
        meta = read_json(meta_path) if append and meta_path.is_file() else {}
        unlabelled = meta.get("unlabelled_success_episodes", [])
        self.unlabelled: list[int] = [i for i in unlabelled if i < self.writer.num_episodes]
        older = self.writer.features is not None and IMAGES_UNSYNCED_KEY not in self.writer.features
        self.columns = tuple(key for key in EXTRA_KEYS if not (older and key == IMAGES_UNSYNCED_KEY))
        """The per-step extras written: ``EXTRA_KEYS``, less ``images.unsynced`` when continuing a
        folder recorded before that column existed."""
        self._write_meta()
        self.instruction: str | None = None
        self.frames: list[dict[str, Any]] = []

    def start_episode(self, instruction: str) -> None:
        if self.instruction is not None:
            raise RuntimeError("an episode is already open: end it first")
        self.instruction = instruction
        self.frames = []

    def add_frame(
        self,
        proprio: np.ndarray,
        images: dict[str, np.ndarray],
        policy_action: np.ndarray | None,
        sent: JointCommand,
        measured_arm_qpos_rad: np.ndarray,
        safety_events: Sequence[str],
        held: bool,
        intervention: bool,
        privileged: np.ndarray | None = None,
        unsynced_cameras: Sequence[str] = (),
    ) -> np.ndarray:
        """Record one control step (every array is copied); returns the action written for it.

        ``policy_action`` is recorded clipped to [-1, 1], as the controllers clip it. Pass None on
        intervention frames: the step is then labelled by ``command_to_action`` from ``sent`` (as
        it is when the policy's action is not finite). A policy action given on an intervention
        frame is recorded as given, so the ``action`` column would hold the overridden proposal.
        ``unsynced_cameras`` are the robot's cameras whose frame is not the step's (the observation's
        ``extras["unsynced_cameras"]``); the step is flagged when one of them is recorded.
        """
        if self.instruction is None:
            raise RuntimeError("add_frame before start_episode")
        if sorted(images) != self.cameras:
            raise ValueError(f"images for cameras {sorted(images)}, the recorder records {self.cameras}")
        for camera, image in images.items():
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
                raise ValueError(f"image {camera!r} must be uint8 [H, W, 3], got {image.dtype} {image.shape}")
        if self.frames and (privileged is None) != (self.frames[0]["privileged"] is None):
            raise ValueError("privileged state must be given on every frame of an episode or on none")
        if policy_action is None or not np.all(np.isfinite(policy_action)):
            action = command_to_action(
                sent, measured_arm_qpos_rad, self.control_mode, self.kinematics, self.settings, self.robot
            )
        else:
            action = np.clip(np.asarray(policy_action, np.float32).reshape(-1), -1.0, 1.0)
        if action.shape != (self.action_dim,):
            raise ValueError(
                f"{self.control_mode} actions have {self.action_dim} entries, got {action.shape}"
            )
        self.frames.append(
            {
                "proprio": np.array(proprio, np.float32).reshape(-1),
                "privileged": None if privileged is None else np.array(privileged, np.float32).reshape(-1),
                "action": action,
                "images": {camera: image.copy() for camera, image in images.items()},
                COMMAND_ARM_KEY: np.array(sent.arm_qpos_rad, np.float64),
                COMMAND_GRIPPER_KEY: np.array([sent.gripper_opening_m], np.float64),
                SAFETY_EVENTS_KEY: encode_safety_events(safety_events),
                SAFETY_HELD_KEY: bool(held),
                INTERVENTION_KEY: bool(intervention),
                IMAGES_UNSYNCED_KEY: bool(set(unsynced_cameras) & set(self.cameras)),
            }
        )
        return action

    def end_episode(self, success: bool | None) -> int:
        """Write the open episode; returns its episode index. ``success=None`` (not labelled) is
        stored as False and listed in ``meta/deployment.json``."""
        if self.instruction is None:
            raise RuntimeError("end_episode without an open episode")
        frames, instruction = self.frames, self.instruction
        self.instruction, self.frames = None, []
        if not frames:
            raise ValueError("the episode has no frames; nothing was written")
        dtypes = {
            SAFETY_EVENTS_KEY: np.int64,
            SAFETY_HELD_KEY: bool,
            INTERVENTION_KEY: bool,
            IMAGES_UNSYNCED_KEY: bool,
        }
        extras = {key: np.asarray([frame[key] for frame in frames], dtypes.get(key)) for key in self.columns}
        episode = Episode(
            images={
                camera: np.stack([frame["images"][camera] for frame in frames]) for camera in self.cameras
            },
            proprio=np.stack([frame["proprio"] for frame in frames]),
            actions=np.stack([frame["action"] for frame in frames]),
            instruction=instruction,
            success=bool(success),
            privileged=None
            if frames[0]["privileged"] is None
            else np.stack([f["privileged"] for f in frames]),
            extras=extras,
        )
        index = self.writer.add_episode(episode)
        if success is None:
            self.unlabelled.append(index)
            self._write_meta()
        return index

    def _write_meta(self) -> None:
        meta = {
            "control_mode": self.control_mode,
            "safety_events": list(SAFETY_EVENTS),
            "safety_events_key": SAFETY_EVENTS_KEY,
            "controller_settings": dataclasses.asdict(self.settings),
            "unlabelled_success_episodes": self.unlabelled,
        }
        atomic_write_text(self.root / DEPLOYMENT_META_PATH, json.dumps(meta, indent=4) + "\n")

    def close(self) -> None:
        """Write an open episode that has frames (success unlabelled), then finish the dataset."""
        try:
            if self.instruction is not None and self.frames:
                self.end_episode(None)
        finally:
            self.instruction = None
            self.writer.close()

    def __enter__(self) -> DeploymentRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def session_recorder(
    section: RecordingSection, root: Path, env: EnvConfig, policy_cameras: Sequence[str]
) -> DeploymentRecorder | None:
    """The recorder of a ``vla-rl deploy`` or ``learn-online`` session at ``root`` (None unless
    ``section.enabled``): ``section.cameras`` or else the policy's own, the env's control rate, mode and
    controller settings (which turn intervention commands into actions), and the dataset version asked
    for, else the existing folder's, else the library's default."""
    if not section.enabled:
        return None
    version = section.codebase_version
    if not version:
        version = dataset_version(root) if (root / INFO_PATH).is_file() else DEFAULT_CODEBASE_VERSION
    return DeploymentRecorder(
        root,
        env.control_hz,
        env.control_mode,
        section.cameras if section.cameras is not None else policy_cameras,
        settings=ControllerSettings(**env.options.get("controller", {})),
        append=root.exists(),
        codebase_version=version,
        finalize_every_episodes=section.finalize_every_episodes,
    )
