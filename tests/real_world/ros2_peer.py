"""DDS peers for tests/real_world/test_ros2_dds.py, run as ``python ros2_peer.py SCENARIO OUT_DIR``.

Every role creates a DDS participant, so each refuses to run unless the process is in a private
network namespace (only ``lo``): the test starts a scenario under ``unshare -n``, and the scenario
starts its roles as child processes, which share that namespace. Discovery is unicast on
127.0.0.1 (``dds.loopback_config``), so it needs no multicast on ``lo``.

Scenarios (each exits 0 only if all its roles did, within a deadline):

* ``pubsub``: ``pub`` publishes JointState (best-effort), Image and JointTrajectory (reliable);
  ``sub`` receives them through default (best-effort) subscriptions and through raw readers that
  keep the CDR bytes exactly as they arrived, and also holds a reliable subscription on the
  best-effort JointState topic, which must stay empty. Writes ``sub.json`` and ``pub.json``.
* ``robot_and_driver``: ``driver`` plays a robot (joint states, a camera, task state; records the commands it
  gets into ``driver.json``); ``robot`` runs ``Ros2Robot`` against it and writes ``robot.json``.

Importing this module creates no participant: the test imports ``sample_messages`` from it.
"""

from __future__ import annotations

import faulthandler
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

DEADLINE_S = 20.0
JOINTS = tuple(f"joint{i}" for i in range(1, 8))
FINGERS = ("finger_joint1", "finger_joint2")
STAMP_S = 1_700_000_000.25


def image_pattern(height: int = 64, width: int = 64) -> np.ndarray:
    return (np.arange(height * width * 3) % 251).astype(np.uint8).reshape(height, width, 3)


def sample_messages() -> dict[str, tuple[str, str, str, Any]]:
    """name -> (ROS topic, message type, QoS profile of the publisher, rosbags message)."""
    from vla_rl.real_world import ros_messages as m
    from vla_rl.real_world.ros2.messages import ROS2
    from vla_rl.real_world.ros2.types import message

    qpos = np.linspace(-1.0, 1.0, 7)
    chunk = qpos + 0.01 * np.arange(3)[:, None]
    return {
        "joint_state": (
            "/joint_states",
            m.JOINT_STATE,
            "sensor_data",
            ROS2.joint_state_message(STAMP_S, JOINTS, qpos, np.full(7, 0.5)),
        ),
        "image": (
            "/camera/front/image_raw",
            m.IMAGE,
            "sensor_data",
            ROS2.image_message(STAMP_S, image_pattern()),
        ),
        "trajectory": (
            "/joint_command",
            m.JOINT_TRAJECTORY,
            "reliable",
            ROS2.trajectory_message(JOINTS, chunk, 0.1),
        ),
        # Five bytes of CDR: shows whether anything pads a message that is not a multiple of 4.
        "estop": ("/estop", "std_msgs/msg/Bool", "reliable", message("std_msgs/msg/Bool", data=True)),
    }


def require_private_namespace() -> None:
    """Exit unless the only network interface is ``lo`` (a fresh ``unshare -n`` namespace)."""
    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        sys.exit(
            f"refusing to create a DDS participant outside a private network namespace (interfaces {names})"
        )


def _node() -> Any:
    require_private_namespace()
    from vla_rl.real_world.ros2.dds import DdsNode, loopback_config

    return DdsNode(config=loopback_config())


def _until(predicate: Any, timeout_s: float, period_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(period_s)
    return True


def role_pub(out: Path) -> int:
    node = _node()
    samples = sample_messages()
    pubs = {name: node.publisher(topic, msgtype, qos) for name, (topic, msgtype, qos, _) in samples.items()}
    matched = _until(lambda: all(p.subscription_count() > 0 for p in pubs.values()), DEADLINE_S / 2)
    done = out / "sub_done"
    # Best-effort samples can be dropped, and the subscriber's readers match one by one: repeat.
    deadline = time.monotonic() + DEADLINE_S / 2
    most = dict.fromkeys(pubs, 0)  # matched subscriptions, most seen at once
    while matched and not done.exists() and time.monotonic() < deadline:
        for name, publisher in pubs.items():
            publisher.publish(samples[name][3])
            most[name] = max(most[name], publisher.subscription_count())
        time.sleep(0.02)
    (out / "pub.json").write_text(json.dumps({"matched": matched, "max_subscription_counts": most}))
    node.close()
    return 0 if done.exists() else 1


def role_sub(out: Path) -> int:
    from cyclonedds._clayer import ddspy_take  # raw (data, info) pairs: the bytes as they arrived
    from cyclonedds.core import InstanceState, SampleState, ViewState
    from cyclonedds.sub import DataReader
    from vla_rl.real_world.ros2.dds import dds_qos
    from vla_rl.real_world.ros2.types import idl_types, typestore

    node = _node()
    samples = sample_messages()
    subs = {name: node.subscription(topic, msgtype) for name, (topic, msgtype, _, _) in samples.items()}
    raw_readers = {
        name: DataReader(
            node.participant, node.topic(topic, msgtype), qos=dds_qos("sensor_data", writer=False)
        )
        for name, (topic, msgtype, _, _) in samples.items()
    }
    reliable_js = node.subscription("/joint_states", samples["joint_state"][1], qos="reliable")
    raw: dict[str, bytes] = {}
    mask = SampleState.Any | ViewState.Any | InstanceState.Any

    def all_in() -> bool:
        for name, reader in raw_readers.items():
            for data, info in ddspy_take(reader._ref, mask, 8):
                if info.valid_data:
                    raw[name] = bytes(data)
        return len(raw) == len(samples) and all(s.count > 0 for s in subs.values())

    ok = _until(all_in, DEADLINE_S / 2)
    time.sleep(0.3)  # the best-effort JointState keeps coming: the reliable subscription must stay empty
    result: dict[str, Any] = {"ok": ok, "reliable_on_best_effort": reliable_js.count, "messages": {}}
    for name, (_, msgtype, _, _) in samples.items():
        msg = subs[name].latest()
        if msg is None:
            continue
        result["messages"][name] = {
            "rosbags_cdr": bytes(typestore().serialize_cdr(msg, msgtype)).hex(),
            "idl_cdr": idl_types().serialize(msg, msgtype).hex(),
            "raw_cdr": raw.get(name, b"").hex(),
        }
    (out / "sub.json").write_text(json.dumps(result))
    (out / "sub_done").touch()
    node.close()
    return 0 if ok else 1


def role_driver(out: Path) -> int:
    from vla_rl.real_world import ros_messages as m
    from vla_rl.real_world.ros2.messages import ROS2

    node = _node()
    joint_pub = node.publisher("/joint_states", m.JOINT_STATE, "sensor_data")
    image_pub = node.publisher("/camera/front/image_raw", m.IMAGE, "sensor_data")
    task_pub = node.publisher("/task_state", m.FLOAT64_MULTI_ARRAY, "sensor_data")
    trajectories: list[list[list[float]]] = []
    node.subscription(
        "/joint_command",
        m.JOINT_TRAJECTORY,
        lambda msg: trajectories.append(m.parse_trajectory(msg).tolist()),
        qos="reliable",
    )
    gripper = node.subscription("/gripper_command", m.FLOAT64_MULTI_ARRAY, qos="reliable")
    names = [*JOINTS, *FINGERS]
    position = np.concatenate([np.linspace(-1.0, 1.0, 7), [0.02, 0.02]])
    deadline = time.monotonic() + DEADLINE_S
    while len(trajectories) < 2 or gripper.count < 2:
        if time.monotonic() > deadline:
            break
        stamp_s = STAMP_S + time.monotonic()
        joint_pub.publish(ROS2.joint_state_message(stamp_s, names, position, np.zeros(9)))
        image_pub.publish(ROS2.image_message(stamp_s, image_pattern()))
        task_pub.publish(ROS2.float64_array_message([1.0, 2.0, 3.0]))
        time.sleep(0.01)
    latest = gripper.latest()
    result = {"trajectories": trajectories, "gripper": None if latest is None else latest.data.tolist()}
    (out / "driver.json").write_text(json.dumps(result))
    node.close()
    return 0 if len(trajectories) >= 2 else 1


def role_robot(out: Path) -> int:
    require_private_namespace()
    from vla_rl.real_world.robot import JointCommand, RobotError
    from vla_rl.real_world.ros2.dds import loopback_config
    from vla_rl.real_world.ros2.robot import Ros2Robot, Ros2RobotConfig
    from vla_rl.real_world.topics import RobotTopics

    base = {"dds_config": loopback_config(), "gripper_joint_names": FINGERS}
    lonely = Ros2Robot(
        Ros2RobotConfig(topics=RobotTopics(joint_states="/nobody"), connect_timeout_s=0.5, **base)
    )
    try:
        lonely.connect()
        timeout_error = ""
    except RobotError as error:
        timeout_error = str(error)
    config = Ros2RobotConfig(cameras=("front",), task_state_dim=3, connect_timeout_s=DEADLINE_S / 2, **base)
    with Ros2Robot(config) as robot:
        robot.wait_for_new_observation(-np.inf, 1.0)
        _until(
            lambda: bool(robot.get_observation().images) and robot.get_observation().task_state is not None, 5
        )
        obs = robot.get_observation()
        target = np.linspace(-1.0, 1.0, 7) + 0.1
        robot.send_action(JointCommand(target, 0.03))
        robot.send_trajectory([JointCommand(target + 0.01 * i, 0.04) for i in range(3)], dt_s=0.1)
        _until(lambda: (out / "driver.json").exists(), DEADLINE_S / 2)
    result = {
        "timeout_error": timeout_error,
        "qpos": obs.arm_qpos_rad.tolist(),
        "gripper_opening_m": obs.gripper_opening_m,
        "image_equal": "front" in obs.images and bool(np.array_equal(obs.images["front"], image_pattern())),
        "task_state": None if obs.task_state is None else obs.task_state.tolist(),
        "features": sorted(robot.observation_features),
    }
    (out / "robot.json").write_text(json.dumps(result))
    return 0


ROLES = {"pub": role_pub, "sub": role_sub, "driver": role_driver, "robot": role_robot}
SCENARIOS = {"pubsub": ("sub", "pub"), "robot_and_driver": ("driver", "robot")}


def run_scenario(name: str, out: Path) -> int:
    """Start the scenario's roles as child processes (same namespace) and wait for all of them."""
    require_private_namespace()
    procs = {}
    for role in SCENARIOS[name]:
        log = open(out / f"{role}.log", "w")  # noqa: SIM115 (closed with the process)
        procs[role] = subprocess.Popen([sys.executable, __file__, role, str(out)], stdout=log, stderr=log)
    deadline = time.monotonic() + DEADLINE_S + 5
    codes = {}
    for role, proc in procs.items():
        try:
            codes[role] = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes[role] = proc.wait()
    (out / "codes.json").write_text(json.dumps(codes))
    return 0 if all(code == 0 for code in codes.values()) else 1


def main(argv: list[str]) -> int:
    what, out = argv[1], Path(argv[2])
    # A stuck role prints where it is stuck and exits, before the scenario kills it silently.
    faulthandler.dump_traceback_later(DEADLINE_S + (3 if what in SCENARIOS else 1), exit=True)
    if what in SCENARIOS:
        return run_scenario(what, out)
    return ROLES[what](out)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
