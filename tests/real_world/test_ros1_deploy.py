"""End to end over a real ``roscore``: ``vla-rl sim-robot`` in one process, ``vla-rl deploy`` with a
policy trained by ``vla-rl train`` in another, compared with direct evaluation on the same seeds.

Everything runs inside a private network namespace made with ``unshare -n`` (roscore's ``rosout``
binds all interfaces whatever ``ROS_IP`` says)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from namespaces import private_namespace_unavailable, rehearse
from vla_rl.real_world.policy_runner import load_trained_policy
from vla_rl.real_world.sim_eval import evaluate_on_seeds

EPISODES = 16
SEED = 1000


def _unavailable() -> str | None:
    if shutil.which("roscore") is None:
        return "roscore is not installed (make ros installs ROS 1 from the system's packages)"
    return private_namespace_unavailable()


pytestmark = pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))


def test_deploy_over_ros1_succeeds_as_often_as_direct_evaluation(reach_run: Path, tmp_path: Path) -> None:
    result = rehearse(tmp_path, [f"checkpoint={reach_run}", f"episodes={EPISODES}", f"seed={SEED}"])
    deploy = result["deploy"]
    direct = evaluate_on_seeds(load_trained_policy(reach_run), [SEED + i for i in range(EPISODES)])
    over_ros = [episode["success"] for episode in deploy["per_episode"]]
    assert len(over_ros) == EPISODES and None not in over_ros
    print(f"success over ROS {np.mean(over_ros):.3f}, direct {np.mean(direct):.3f} ({EPISODES} episodes)")
    assert abs(np.mean(over_ros) - np.mean(direct)) <= 0.10
    assert np.mean(direct) >= 0.75, "the fixture's policy should solve reach"
    # Every episode ran to the task's time limit at the robot's pace, and commands arrived.
    assert all(episode["steps"] >= 45 for episode in deploy["per_episode"])
    latencies = np.asarray(result["sim"]["latencies_s"])
    assert len(latencies) >= 0.9 * sum(episode["steps"] for episode in deploy["per_episode"])
    assert np.median(latencies) < 0.05  # one control period at 20 Hz


WIDE_CAMERA = ["robot.sim_image_width=240", "+robot.image_crops.front=[0,40,160,160]"]
"""A 160x240 camera (3:2, the view widened at the sides) and the crop of its square centre."""


@pytest.mark.parametrize(
    ("image_transport", "camera"), [("raw", []), ("compressed", []), ("raw", WIDE_CAMERA)]
)
def test_a_camera_larger_than_the_policys_reaches_it_resized_over_ros1(
    reach_run: Path, tmp_path: Path, image_transport: str, camera: list[str]
) -> None:
    # The simulated robot publishes 160x160 frames of the front camera (the recording adds it to the
    # state policy's observation), raw or as jpeg, or 160x240 frames whose square centre the robot
    # side crops (``WIDE_CAMERA``); the robot side decodes them and resizes them to the policy's
    # 64x64, and the recording keeps what the policy would see. Its first frame shows the
    # episode's start as the 64-pixel render does, up to anti-aliasing, jpeg and the recording's lossy
    # video codec: measured 3.2-3.3 levels mean absolute difference (raw), against 70-110 for the
    # same view upside down. (Without codecs the resize is checked to finer than a pixel's offset in
    # test_sim_robot.py.) The robot waits up to 40 ms (of the 50 ms period) for a period's frames, so
    # that an episode's first frame is of the new episode on a loaded machine too.
    from vla_rl.real_world.sim_robot import SimulatedRobot

    from vla_rl.data.lerobot_format import open_dataset
    from vla_rl.envs.config import EnvConfig

    overrides = [f"checkpoint={reach_run}", "episodes=2", f"seed={SEED}", "robot.sim_image_size=160"]
    overrides += [f"robot.image_transport={image_transport}", "robot.image_wait_s=0.04", *camera]
    rehearse(tmp_path, [*overrides, "recording.enabled=true", "recording.cameras=[front]"])
    dataset = open_dataset(tmp_path / "deploy" / "dataset")
    native = SimulatedRobot(EnvConfig(task="reach", cameras=["front"], image_size=64))
    try:
        for index in range(2):
            frames = dataset.episode(index).images["front"]
            assert frames.shape[1:] == (64, 64, 3)
            expected = native.reset(SEED + index).images["front"].astype(int)
            difference = np.abs(frames[0].astype(int) - expected).mean()
            upside_down = np.abs(frames[0].astype(int) - expected[::-1]).mean()
            print(f"episode {index}: |recorded - native| {difference:.2f}, upside down {upside_down:.2f}")
            assert difference < 8.0 < upside_down
    finally:
        native.close()
