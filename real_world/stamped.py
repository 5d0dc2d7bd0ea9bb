"""Stamped samples, the matching of camera images to a joint state by their stamps, and the robot
side that the ROS transports share: streams of stamped messages kept for that matching."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from vla_rl.real_world.camera_view import CameraViews
from vla_rl.real_world.kinematics import ArmKinematics
from vla_rl.real_world.robot import (
    Feature,
    Robot,
    RobotError,
    RobotObservation,
    command_features,
    robot_features,
)
from vla_rl.real_world.ros_messages import (
    RosMessages,
    image_channel,
    parse_compressed_image,
    parse_image,
    tcp_pose_xyzw,
)
from vla_rl.real_world.topics import RobotTopics

HISTORY = 16
"""Joint states and images kept per stream for time synchronisation (a bit over half a second at 30 Hz)."""


@dataclass
class Stamped:
    """A received value and its header stamp (s)."""

    stamp_s: float
    value: Any


def match_images(
    histories: Mapping[str, Iterable[Stamped]], stamp_s: float, slop_s: float
) -> tuple[dict[str, np.ndarray], dict[str, float], list[str]]:
    """For each camera, the image whose stamp is nearest to the joint state's ``stamp_s``:
    ``(images, image stamps, cameras without an image within slop_s)`` (an approximate-time
    synchroniser over the last few messages of each stream)."""
    images, stamps, unsynced = {}, {}, []
    for camera, history in histories.items():
        candidates = list(history)
        if not candidates:
            unsynced.append(camera)
            continue
        nearest = min(candidates, key=lambda item: abs(item.stamp_s - stamp_s))
        images[camera], stamps[camera] = nearest.value, nearest.stamp_s
        if abs(nearest.stamp_s - stamp_s) > slop_s:
            unsynced.append(camera)
    return images, stamps, unsynced


@dataclass
class StreamedRobotConfig:
    """How a ROS robot is reached and what it reports, whatever the ROS version."""

    topics: RobotTopics = field(default_factory=RobotTopics)
    """Where each stream lives (over ROS 2 the DDS topics are these with ``rt`` in front of the
    leading slash)."""
    cameras: tuple[str, ...] = ()
    """Cameras to subscribe to (``topics.image`` with the name filled in)."""
    image_size: tuple[int, int] = (64, 64)
    """Height and width of the images the policy reads (declared in the observation features); a
    frame of another size is resized to it, after its camera's crop (``camera_view``)."""
    image_crops: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    """Per camera, the region ``(top, left, height, width)`` of the published frame that is kept."""
    task_state_dim: int = 0
    """Length of the task-state vector on ``topics.task_state``; 0: not subscribed."""
    image_transport: Literal["raw", "compressed"] = "raw"
    """``raw``: sensor_msgs/Image on ``topics.image``; ``compressed``: sensor_msgs/CompressedImage (jpeg
    or png, decoded here) on that topic + ``/compressed``, where image_transport republishes it."""
    command_type: Literal["joint_trajectory", "float64_multi_array", "pose_stamped"] = "joint_trajectory"
    """What ``topics.command`` carries: ``joint_trajectory`` (one point per command, or a chunk with
    ``send_trajectory``, which needs this type); ``float64_multi_array`` (the joint targets, for a
    forward_command_controller); ``pose_stamped`` (the TCP pose of the joint target by forward
    kinematics of the training model, for a Cartesian impedance controller such as franka_ros's
    ``equilibrium_pose``; the controller's end-effector frame must be the model's TCP site: the
    hand frame moved 0.1034 m along its z axis, franka's default end effector)."""
    pose_frame_id: str = "panda_link0"
    """``header.frame_id`` of PoseStamped commands: the arm's base frame (the model's ``link0``)."""
    sync_slop_s: float = 0.02
    """An image belongs to a joint state when their stamps differ by at most this."""
    image_wait_s: float = 0.025
    """After a new joint state, how long to wait for each camera's image that belongs to it: frames
    often arrive after the joint state of their period. One that has not come by then leaves the
    observation unsynced (``unsynced_cameras``)."""
    connect_timeout_s: float = 10.0
    """``connect`` fails when no joint state arrives within this."""


class StreamedRobot(Robot):
    """A robot whose state arrives as messages (ROS 1 and ROS 2 subscriptions): the last
    ``HISTORY`` joint states and images of each camera, the latest task state and a count of the
    messages that could not be used. Subscription callbacks feed it with ``add_*`` and ``on_*``;
    ``messages`` builds and reads the messages of the transport's ROS version."""

    messages: RosMessages

    def __init__(self, config: StreamedRobotConfig, num_joints: int = 7) -> None:
        self.config = config
        self.num_joints = num_joints
        self._kinematics: ArmKinematics | None = None
        self._lock = threading.Condition()
        self._joint_states: deque[Stamped] = deque(maxlen=HISTORY)
        self._images: dict[str, deque[Stamped]] = {c: deque(maxlen=HISTORY) for c in config.cameras}
        self._task_state: Stamped | None = None
        self._views = CameraViews(config.image_size, config.image_crops)
        self.dropped: dict[str, int] = {"images": 0}
        """Messages that could not be used (e.g. images that do not decode), dropped, not raised."""

    @property
    def observation_features(self) -> dict[str, Feature]:
        config = self.config
        return robot_features(config.cameras, config.image_size, config.task_state_dim, self.num_joints)

    @property
    def action_features(self) -> dict[str, Feature]:
        return command_features(self.num_joints)

    def clear_streams(self) -> None:
        """Forget every message received (from an earlier connection)."""
        with self._lock:
            self._joint_states.clear()
            for history in self._images.values():
                history.clear()
            self._task_state = None

    def image_subscriptions(self) -> list[tuple[str, str, str]]:
        """(camera, topic, message type) of each camera, raw or compressed (``image_transport``)."""
        config = self.config
        return [(c, *image_channel(config.topics, c, config.image_transport)) for c in config.cameras]

    def load_kinematics(self) -> None:
        """Load the forward kinematics ``pose_stamped`` commands need (once, when connecting)."""
        if self.config.command_type == "pose_stamped" and self._kinematics is None:
            self._kinematics = ArmKinematics()

    def pose_command(self, arm_qpos_rad: np.ndarray, stamp_s: float) -> Any:
        """geometry_msgs/PoseStamped of the TCP pose of a joint target, in ``config.pose_frame_id``."""
        assert self._kinematics is not None, "load_kinematics first"
        position, quat_xyzw = tcp_pose_xyzw(self._kinematics, arm_qpos_rad)
        return self.messages.pose_stamped_message(stamp_s, position, quat_xyzw, self.config.pose_frame_id)

    # -------------------------------------------------------------------------- inputs
    def on_image(self, camera: str, msg: Any) -> None:
        """A camera's Image or CompressedImage arrived."""
        parse = parse_compressed_image if self.config.image_transport == "compressed" else parse_image
        self.add_image(camera, self.messages.seconds(msg.header.stamp), parse, msg)

    def on_task_state(self, msg: Any) -> None:
        """A std_msgs/Float64MultiArray task state arrived."""
        self.add_task_state(msg.data)

    def add_joint_state(self, stamp_s: float, value: Any) -> None:
        with self._lock:
            self._joint_states.append(Stamped(stamp_s, value))
            self._lock.notify_all()

    def add_image(self, camera: str, stamp_s: float, parse: Callable[[Any], np.ndarray], msg: Any) -> None:
        """``parse(msg)`` as the camera's image; one that raises ValueError is counted and dropped."""
        try:
            rgb = parse(msg)
        except ValueError:
            with self._lock:
                self.dropped["images"] += 1
            return
        with self._lock:
            self._images[camera].append(Stamped(stamp_s, rgb))
            self._lock.notify_all()

    def add_task_state(self, data: Any) -> None:
        """A task-state vector, stamped on arrival."""
        with self._lock:
            self._task_state = Stamped(time.time(), np.asarray(data, dtype=np.float64).copy())

    # -------------------------------------------------------------------------- reading
    def wait_for_new_observation(self, after_stamp_s: float, timeout_s: float) -> bool:
        """Block until a joint state stamped after ``after_stamp_s`` arrives (False on timeout), then
        up to ``config.image_wait_s`` until every camera has an image within the sync slop of the
        newest joint state."""
        with self._lock:
            if not self._lock.wait_for(
                lambda: bool(self._joint_states) and self._joint_states[-1].stamp_s > after_stamp_s, timeout_s
            ):
                return False
            self._lock.wait_for(self._images_synced, self.config.image_wait_s)
            return True

    def _images_synced(self) -> bool:
        """Whether every camera has an image for the newest joint state (under the lock)."""
        stamp_s, slop_s = self._joint_states[-1].stamp_s, self.config.sync_slop_s
        return all(any(abs(i.stamp_s - stamp_s) <= slop_s for i in h) for h in self._images.values())

    def observation(
        self, joint_values: Callable[[Any], tuple[np.ndarray, np.ndarray, float]], **extras: Any
    ) -> RobotObservation:
        """The newest joint state with the images nearest to it (each as the policy sees it:
        cropped and resized, see ``camera_view``) and the task state; RobotError before the first
        joint state; ValueError when a camera's crop reaches outside its frame. ``joint_values``
        turns a stored joint state into arm angles [7], velocities [7] and the gripper opening (under
        the lock); ``extras`` join ``unsynced_cameras`` in ``RobotObservation.extras``."""
        with self._lock:
            if not self._joint_states:
                raise RobotError("no joint state received yet")
            joint = self._joint_states[-1]
            qpos, qvel, opening = joint_values(joint.value)
            images, stamps, unsynced = match_images(self._images, joint.stamp_s, self.config.sync_slop_s)
            task_state = None if self._task_state is None else self._task_state.value
        return RobotObservation(
            arm_qpos_rad=qpos,
            arm_qvel_rad_s=qvel,
            gripper_opening_m=opening,
            joint_state_stamp_s=joint.stamp_s,
            images=self._views(images),
            image_stamps_s=stamps,
            task_state=task_state,
            extras={"unsynced_cameras": unsynced, **extras},
        )


def await_subscribers(
    subscribers: Mapping[str, Callable[[], int]], deadline: float, timeout_s: float
) -> None:
    """Wait until every topic's publisher has a subscriber (``topic -> count``) by ``time.monotonic()``
    ``deadline``, or raise RobotError naming the first without (commands sent before are lost)."""
    for topic, count in subscribers.items():
        while count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if count() == 0:
            raise RobotError(f"nobody subscribes to {topic} within {timeout_s} s")
