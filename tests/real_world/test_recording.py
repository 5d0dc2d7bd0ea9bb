"""Deployment recording: round trip through the dataset writer/reader (intervention frames labelled
by ``action_labels``), resume after a crash, and the session recorder's choices."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_action_labels import controller_command
from vla_rl.real_world.action_labels import command_to_action
from vla_rl.real_world.deploy_config import RecordingSection
from vla_rl.real_world.recording import (
    COMMAND_ARM_KEY,
    COMMAND_GRIPPER_KEY,
    DEPLOYMENT_META_PATH,
    EXTRA_KEYS,
    IMAGES_UNSYNCED_KEY,
    INTERVENTION_KEY,
    SAFETY_EVENTS,
    SAFETY_EVENTS_KEY,
    SAFETY_HELD_KEY,
    DeploymentRecorder,
    NoIntervention,
    ScriptedIntervention,
    decode_safety_events,
    encode_safety_events,
    session_recorder,
)
from vla_rl.real_world.robot import JointCommand
from vla_rl.robots.controllers import ControllerSettings
from vla_rl.robots.panda import PANDA

from vla_rl.data.lerobot_format import dataset_version, open_dataset
from vla_rl.data.video import LOSSLESS_VIDEO
from vla_rl.envs.config import EnvConfig

HOME = np.asarray(PANDA.home_arm_qpos, dtype=np.float64)
SETTINGS = ControllerSettings()


def test_safety_event_mask_round_trip():
    assert decode_safety_events(0) == []
    for bit, name in enumerate(SAFETY_EVENTS):
        assert encode_safety_events([name]) == 1 << bit
    mask = encode_safety_events(["workspace", "estop", "jump"])
    assert mask == 0b1000100001
    assert decode_safety_events(mask) == ["estop", "jump", "workspace"]
    assert decode_safety_events((1 << len(SAFETY_EVENTS)) - 1) == list(SAFETY_EVENTS)
    with pytest.raises(ValueError, match="unknown safety event"):
        encode_safety_events(["meteor"])
    with pytest.raises(ValueError, match="bits beyond"):
        decode_safety_events(1 << len(SAFETY_EVENTS))


def test_every_safety_layer_event_has_a_bit():
    safety = pytest.importorskip("vla_rl.real_world.safety")
    assert set(safety.EVENTS) <= set(SAFETY_EVENTS)


def test_intervention_inputs():
    assert NoIntervention().poll() is None
    override = JointCommand(HOME.copy(), 0.02)
    scripted = ScriptedIntervention({1: override})
    polled = [scripted.poll() for _ in range(3)]
    assert polled[0] is None and polled[2] is None
    np.testing.assert_array_equal(polled[1].arm_qpos_rad, HOME)
    scripted.reset()
    assert scripted.poll() is None and scripted.poll() is not None


def record_episode(recorder, rng, kinematics, length, interventions, events, success):
    """Record ``length`` frames; returns what was given, per frame, for the checks."""
    recorder.start_episode(f"rehearse {success}")
    given = []
    q = HOME.copy()
    for step in range(length):
        action = rng.uniform(-0.3, 0.3, 7)
        human = step in interventions
        command = controller_command("ee_delta_pose", action, q, kinematics)
        frame = {
            "proprio": rng.normal(size=24).astype(np.float32),
            "images": {"front": rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)},
            "policy_action": None if human else rng.uniform(-1.2, 1.2, 7),
            "sent": command,
            "measured_arm_qpos_rad": q.copy(),
            "safety_events": events.get(step, []),
            "held": bool(events.get(step)),
            "intervention": human,
            "privileged": rng.normal(size=5).astype(np.float32),
        }
        frame["written"] = recorder.add_frame(**frame)
        given.append(frame)
        q = command.arm_qpos_rad  # the arm reaches its target before the next step
    recorder.end_episode(success)
    return given


def test_recorded_episodes_read_back_equal(tmp_path, kinematics):
    rng = np.random.default_rng(1)
    root = tmp_path / "deploy"
    with DeploymentRecorder(
        root, 10.0, "ee_delta_pose", ["front"], video=LOSSLESS_VIDEO, kinematics=kinematics
    ) as recorder:
        episodes = [
            record_episode(recorder, rng, kinematics, 6, {2, 3}, {3: ["workspace", "ee_speed"]}, True),
            record_episode(recorder, rng, kinematics, 6, {5}, {0: ["stale_image"], 4: ["estop"]}, None),
        ]
    dataset = open_dataset(root)
    assert dataset.num_episodes == 2
    assert dataset.features[COMMAND_ARM_KEY]["names"] == list(PANDA.arm_joint_names)
    assert dataset.features["action"]["names"] == ["dx", "dy", "dz", "drx", "dry", "drz", "gripper"]
    meta = json.loads((root / DEPLOYMENT_META_PATH).read_text())
    assert meta["safety_events"] == list(SAFETY_EVENTS) and meta["control_mode"] == "ee_delta_pose"
    assert meta["unlabelled_success_episodes"] == [1]
    for index, given in enumerate(episodes):
        episode = dataset.episode(index)
        assert len(episode) == 6 and episode.success == (index == 0)
        assert episode.instruction == f"rehearse {[True, None][index]}"
        np.testing.assert_array_equal(
            episode.images["front"], np.stack([f["images"]["front"] for f in given])
        )
        np.testing.assert_array_equal(episode.proprio, np.stack([f["proprio"] for f in given]))
        np.testing.assert_array_equal(episode.privileged, np.stack([f["privileged"] for f in given]))
        np.testing.assert_array_equal(episode.actions, np.stack([f["written"] for f in given]))
        extras = episode.extras
        np.testing.assert_array_equal(
            extras[COMMAND_ARM_KEY], np.stack([f["sent"].arm_qpos_rad for f in given])
        )
        assert extras[COMMAND_ARM_KEY].dtype == np.float64
        np.testing.assert_array_equal(
            extras[COMMAND_GRIPPER_KEY], [[f["sent"].gripper_opening_m] for f in given]
        )
        assert extras[SAFETY_EVENTS_KEY].dtype == np.int64
        assert [decode_safety_events(m) for m in extras[SAFETY_EVENTS_KEY]] == [
            sorted(f["safety_events"], key=SAFETY_EVENTS.index) for f in given
        ]
        np.testing.assert_array_equal(extras[SAFETY_HELD_KEY], [f["held"] for f in given])
        np.testing.assert_array_equal(extras[INTERVENTION_KEY], [f["intervention"] for f in given])
        for frame, action in zip(given, episode.actions, strict=True):
            if frame["intervention"]:
                label = command_to_action(
                    frame["sent"],
                    frame["measured_arm_qpos_rad"],
                    "ee_delta_pose",
                    kinematics,
                    SETTINGS,
                    PANDA,
                )
                np.testing.assert_array_equal(action, label)
            else:
                np.testing.assert_array_equal(
                    action, np.clip(frame["policy_action"], -1, 1).astype(np.float32)
                )


def test_open_episode_is_kept_when_the_loop_dies_and_earlier_ones_without_close(tmp_path, kinematics):
    rng = np.random.default_rng(2)
    root = tmp_path / "crash"
    recorder = DeploymentRecorder(root, 10.0, "joint_delta", ["front"], kinematics=kinematics)
    record_frames = {"images": {"front": np.zeros((32, 32, 3), np.uint8)}, "measured_arm_qpos_rad": HOME}
    frame = {"proprio": np.zeros(3), "sent": JointCommand(HOME, 0.04), "held": False, "intervention": False}
    recorder.start_episode("first")
    recorder.add_frame(policy_action=rng.uniform(-1, 1, 8), safety_events=[], **record_frames, **frame)
    recorder.end_episode(True)
    assert open_dataset(root).num_episodes == 1  # readable before close (a later crash keeps it)
    with pytest.raises(RuntimeError, match="estop"), recorder:
        recorder.start_episode("second")
        for _ in range(3):
            recorder.add_frame(policy_action=None, safety_events=["estop"], **record_frames, **frame)
        raise RuntimeError("estop pressed")
    dataset = open_dataset(root)
    assert dataset.num_episodes == 2 and len(dataset.episode(1)) == 3 and not dataset.episode(1).success
    np.testing.assert_array_equal(dataset.episode(1).actions[:, :7], 0.0)  # held at the measured pose
    assert json.loads((root / DEPLOYMENT_META_PATH).read_text())["unlabelled_success_episodes"] == [1]
    with DeploymentRecorder(
        root, 10.0, "joint_delta", ["front"], kinematics=kinematics, append=True
    ) as again:
        again.start_episode("third")
        again.add_frame(policy_action=np.zeros(8), safety_events=[], **record_frames, **frame)
        assert again.end_episode(False) == 2
    assert open_dataset(root).num_episodes == 3
    assert json.loads((root / DEPLOYMENT_META_PATH).read_text())["unlabelled_success_episodes"] == [1]


def test_add_frame_rejects_mismatched_inputs(tmp_path, kinematics):
    recorder = DeploymentRecorder(tmp_path / "bad", 10.0, "ee_delta_pos", ["front"], kinematics=kinematics)
    recorder.start_episode("bad")
    good = {
        "proprio": np.zeros(3),
        "images": {"front": np.zeros((32, 32, 3), np.uint8)},
        "policy_action": np.zeros(4),
        "sent": JointCommand(HOME, 0.04),
        "measured_arm_qpos_rad": HOME,
        "safety_events": [],
        "held": False,
        "intervention": False,
    }
    with pytest.raises(ValueError, match="cameras"):
        recorder.add_frame(**{**good, "images": {"wrist": good["images"]["front"]}})
    with pytest.raises(ValueError, match="uint8"):
        recorder.add_frame(**{**good, "images": {"front": np.zeros((32, 32, 3))}})
    with pytest.raises(ValueError, match="4 entries"):
        recorder.add_frame(**{**good, "policy_action": np.zeros(7)})
    recorder.add_frame(**good)
    with pytest.raises(ValueError, match="privileged"):
        recorder.add_frame(**{**good, "privileged": np.zeros(2)})
    recorder.close()


def test_a_session_recorder_keeps_the_policys_cameras_unless_told_and_the_envs_controller(tmp_path):
    env = EnvConfig(cameras=["front", "wrist"], options={"controller": {"max_ee_step_m": 0.01}})
    assert session_recorder(RecordingSection(enabled=False), tmp_path / "off", env, ["front"]) is None
    assert not (tmp_path / "off").exists()
    with session_recorder(RecordingSection(enabled=True), tmp_path / "own", env, ["wrist"]) as own:
        assert own.cameras == ["wrist"]  # not the classifier's "front" the env renders beside it
        assert own.settings == ControllerSettings(max_ee_step_m=0.01)
    asked = RecordingSection(enabled=True, cameras=["front", "wrist"])
    with session_recorder(asked, tmp_path / "asked", env, ["wrist"]) as both:
        assert both.cameras == ["front", "wrist"]


def test_a_session_recorder_adds_to_a_folder_in_that_folders_version(tmp_path, kinematics):
    rng = np.random.default_rng(3)
    env = EnvConfig(control_mode="ee_delta_pose", cameras=["front"])
    for version in ("v2.1", ""):  # the second session asks for no version: the folder's is kept
        section = RecordingSection(enabled=True, codebase_version=version)
        with session_recorder(section, tmp_path / "data", env, ["front"]) as recorder:
            record_episode(recorder, rng, kinematics, 3, set(), {}, True)
    assert dataset_version(tmp_path / "data") == "v2.1"
    assert open_dataset(tmp_path / "data").num_episodes == 2
    with session_recorder(RecordingSection(enabled=True), tmp_path / "new", env, ["front"]) as recorder:
        record_episode(recorder, rng, kinematics, 3, set(), {}, True)
    assert dataset_version(tmp_path / "new") == "v3.0"


def test_a_folder_recorded_before_the_unsynced_column_is_continued_without_it(tmp_path, kinematics):
    """The first recorder stands in for one of an earlier version, which wrote every column but
    ``images.unsynced``; a recorder of this version continues that folder in its layout, and a new
    folder gets the column."""
    rng = np.random.default_rng(4)
    older = DeploymentRecorder(tmp_path / "old", 10.0, "ee_delta_pose", ["front"], kinematics=kinematics)
    older.columns = tuple(key for key in EXTRA_KEYS if key != IMAGES_UNSYNCED_KEY)
    with older:
        record_episode(older, rng, kinematics, 3, set(), {}, True)
    with DeploymentRecorder(
        tmp_path / "old", 10.0, "ee_delta_pose", ["front"], kinematics=kinematics, append=True
    ) as recorder:
        record_episode(recorder, rng, kinematics, 3, set(), {}, True)
    dataset = open_dataset(tmp_path / "old")
    assert dataset.num_episodes == 2 and IMAGES_UNSYNCED_KEY not in dataset.episode(1).extras
    with DeploymentRecorder(tmp_path / "new", 10.0, "ee_delta_pose", ["front"], kinematics=kinematics) as new:
        record_episode(new, rng, kinematics, 3, set(), {}, True)
    assert open_dataset(tmp_path / "new").episode(0).extras[IMAGES_UNSYNCED_KEY].tolist() == [False] * 3
