"""The simulated robot's cameras at a real camera's resolution and aspect (``robot.sim_image_size``,
``robot.sim_image_width``): the same view at more pixels, widened at the sides, which the robot side
crops and resizes to the policy's size."""

from __future__ import annotations

import numpy as np
import pytest
from vla_rl.real_world.camera_view import policy_view
from vla_rl.real_world.deploy_config import compose_deploy_config
from vla_rl.real_world.sim_robot import SimulatedRobot
from vla_rl.real_world.transports import sim_robot_env

from vla_rl.envs.config import EnvConfig

POLICY_ENV = EnvConfig(task="pick_place", cameras=["front", "wrist"], image_size=64)


def test_sim_image_size_renders_the_policys_cameras_at_more_pixels_and_changes_nothing_else() -> None:
    assert sim_robot_env(compose_deploy_config([]), POLICY_ENV) == POLICY_ENV
    larger = sim_robot_env(compose_deploy_config(["robot.sim_image_size=160"]), POLICY_ENV)
    assert larger.image_size == 160
    assert larger == EnvConfig(task="pick_place", cameras=["front", "wrist"], image_size=160)


def test_sim_image_width_widens_the_frames_and_changes_nothing_else() -> None:
    wide = sim_robot_env(
        compose_deploy_config(["robot.sim_image_size=96", "robot.sim_image_width=128"]), POLICY_ENV
    )
    assert wide == EnvConfig(
        task="pick_place", cameras=["front", "wrist"], image_size=96, options={"image_width": 128}
    )
    alone = sim_robot_env(compose_deploy_config(["robot.sim_image_width=80"]), POLICY_ENV)
    assert (alone.image_size, alone.options) == (64, {"image_width": 80})


def test_the_square_centre_of_a_wider_camera_is_the_policys_view_and_the_whole_frame_is_not() -> None:
    # A 120x160 camera (4:3) shows the policy's view in its centre 120x120 (the crop a user gives
    # in robot.image_crops), resized to 64 as closely as a square 120-pixel camera would be: closer
    # than the native render is to itself moved by one pixel. The whole frame squeezed to 64x64
    # (no crop) is not.
    native = SimulatedRobot(POLICY_ENV)
    wide = SimulatedRobot(
        sim_robot_env(
            compose_deploy_config(["robot.sim_image_size=120", "robot.sim_image_width=160"]), POLICY_ENV
        )
    )
    try:
        for seed in (3, 4):
            reference, published = native.reset(seed).images, wide.reset(seed).images
            for camera in ("front", "wrist"):
                assert published[camera].shape == (120, 160, 3)
                expected = reference[camera].astype(int)
                moved = min(
                    np.abs(expected[:, 1:] - expected[:, :-1]).mean(),
                    np.abs(expected[1:] - expected[:-1]).mean(),
                )
                cropped = np.abs(
                    policy_view(published[camera], (64, 64), [0, 20, 120, 120]).astype(int) - expected
                ).mean()
                squeezed = np.abs(policy_view(published[camera], (64, 64)).astype(int) - expected).mean()
                print(f"{seed} {camera}: cropped {cropped:.2f}, squeezed {squeezed:.2f}, moved {moved:.2f}")
                assert cropped < moved < squeezed
    finally:
        native.close()
        wide.close()


def test_a_larger_camera_resized_to_the_policys_size_shows_what_the_policy_was_trained_on() -> None:
    # Rendered at 160 pixels and averaged down (bilinear, widened when shrinking), a frame differs
    # from the 64-pixel render only where edges fall between pixels (anti-aliasing). It must be
    # closer to that render than the render is to itself moved by one pixel, across or down
    # (measured: 2.0-3.1 levels against 3.9-7.9), so a shifted, flipped or stale view fails.
    native = SimulatedRobot(POLICY_ENV)
    larger = SimulatedRobot(sim_robot_env(compose_deploy_config(["robot.sim_image_size=160"]), POLICY_ENV))
    try:
        for seed in (3, 4):
            reference, published = native.reset(seed).images, larger.reset(seed).images
            for camera in ("front", "wrist"):
                assert published[camera].shape == (160, 160, 3)
                view = policy_view(published[camera], (64, 64)).astype(int)
                expected = reference[camera].astype(int)
                across = np.abs(expected[:, 1:] - expected[:, :-1]).mean()
                down = np.abs(expected[1:] - expected[:-1]).mean()
                difference = np.abs(view - expected).mean()
                print(f"{seed} {camera}: |resized - native| {difference:.2f}, moved {across:.2f} {down:.2f}")
                assert difference < min(across, down)
    finally:
        native.close()
        larger.close()


class FirstImages:
    """A policy that keeps the first image it is given of each episode and holds still (its action:
    zeros); just what ``evaluate_on_seeds`` calls."""

    def __init__(self) -> None:
        self.firsts: list[np.ndarray] = []
        self._steps = 0

    def act(self, obs: dict, deterministic: bool) -> object:
        import torch

        if self._steps % 50 == 0:  # reach's episodes last 50 steps
            self.firsts.append(obs["rgb_front"][0].numpy().copy())
        self._steps += 1
        return type("Step", (), {"action": torch.zeros(1, 4)})()


@pytest.mark.parametrize(
    "camera",
    [
        {"sim_image_size": 160},
        {"sim_image_size": 120, "sim_image_width": 160, "crops": {"front": [0, 20, 120, 120]}},
    ],
)
def test_direct_evaluation_with_a_larger_camera_gives_the_policy_its_own_view(camera: dict) -> None:
    from vla_rl.real_world.policy_runner import LoadedPolicy
    from vla_rl.real_world.sim_eval import evaluate_on_seeds

    env = EnvConfig(task="reach", cameras=["front"], image_size=64)
    policy = FirstImages()
    loaded = LoadedPolicy(env=env, obs_keys=["rgb_front"], policy=policy)  # type: ignore[arg-type]
    assert len(evaluate_on_seeds(loaded, [3, 4], **camera)) == 2
    native = SimulatedRobot(env)
    try:
        for seed, first in zip([3, 4], policy.firsts, strict=True):
            assert first.shape == (64, 64, 3)
            expected = native.reset(seed).images["front"].astype(int)
            across = np.abs(expected[:, 1:] - expected[:, :-1]).mean()
            assert np.abs(first.astype(int) - expected).mean() < across
    finally:
        native.close()
