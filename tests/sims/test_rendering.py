import dataclasses
import time

import pytest
import torch
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

from benchmarks.physics_reference import physics_env_steps_per_s
from vla_rl.envs.config import EnvConfig


def test_rendered_images_have_the_right_shape_and_content():
    env = MujocoBatchedEnv(
        EnvConfig(task="pick_place", num_envs=4, cameras=["front", "wrist"], image_size=48)
    )
    obs, _ = env.reset(seed=0)
    for cam in ("front", "wrist"):
        image = obs[f"rgb_{cam}"]
        assert image.shape == (4, 48, 48, 3) and image.dtype == torch.uint8
        assert image.float().std() > 10
    # Worlds differ (object poses, colours), so their images differ.
    assert not torch.equal(obs["rgb_front"][0], obs["rgb_front"][1])
    moved = env.step(torch.tensor([[1.0, 0.0, -1.0, 1.0]] * 4)).obs
    assert not torch.equal(moved["rgb_wrist"], obs["rgb_wrist"])
    env.close()


def test_render_speed_smoke():
    env = MujocoBatchedEnv(EnvConfig(task="reach", num_envs=16, cameras=["front"], image_size=64))
    env.reset(seed=0)
    ids = list(range(16))
    env._run_parallel(env._render, ids)
    start = time.perf_counter()
    for _ in range(5):
        env._run_parallel(env._render, ids)
    fps = 5 * 16 / (time.perf_counter() - start)
    print(f"render: {fps:.0f} frames/s at 64x64")
    assert fps > 50
    env.close()


def test_physics_reference_reports_positive_throughput():
    rate = physics_env_steps_per_s(EnvConfig(task="reach", num_envs=4), num_control_steps=3)
    assert rate > 0


def test_physics_reference_with_the_arm_moving_reports_positive_throughput():
    rate = physics_env_steps_per_s(EnvConfig(task="reach", num_envs=4), num_control_steps=3, moving=True)
    assert rate > 0


def test_an_env_renders_the_same_after_another_env_on_its_thread_is_built_and_closed():
    # One worker thread renders on the calling thread, as does an evaluation env built beside
    # a training env: each must draw through its own GL context, not the last one made current.
    cfg = EnvConfig(task="pick_place", num_envs=2, cameras=["front"], image_size=32, num_threads=1)
    training = MujocoBatchedEnv(cfg)
    before = training.reset(seed=0)[0]["rgb_front"].clone()
    evaluation = MujocoBatchedEnv(cfg)
    evaluation.reset(seed=7)
    assert torch.equal(training.reset(seed=0)[0]["rgb_front"], before)
    evaluation.close()
    assert torch.equal(training.reset(seed=0)[0]["rgb_front"], before)
    training.close()


def test_without_opengl_state_only_envs_run_and_cameras_say_what_is_missing():
    """``MUJOCO_GL=disable`` is the headless default where libEGL is missing (a bare GPU container):
    state-only envs must still run and a camera must fail with an error that names the fix. MuJoCo
    reads the variable on import, hence a fresh interpreter."""
    import os
    import subprocess
    import sys

    script = (
        "from vla_rl.envs import EnvConfig, make_env\n"
        "env = make_env(EnvConfig(task='reach', num_envs=2)); env.reset(seed=0); env.close()\n"
        "make_env(EnvConfig(task='reach', num_envs=2, cameras=['front']))\n"
    )
    env = {**os.environ, "MUJOCO_GL": "disable"}
    env.pop("PYOPENGL_PLATFORM", None)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "RuntimeError: MuJoCo rendering is off" in result.stderr
    assert "libegl1" in result.stderr


def test_an_env_renders_the_same_after_another_env_on_its_thread_is_dropped_without_closing():
    # Dropping an env frees its GL objects when it is collected. Freed in whichever context is
    # current, they would delete the other env's objects of the same names (the contexts number
    # theirs alike) and its frames would come back wrong without an error.
    import gc

    cfg = EnvConfig(task="pick_place", num_envs=2, cameras=["front"], image_size=32, num_threads=1)
    dropped = MujocoBatchedEnv(cfg)
    dropped.reset(seed=7)
    kept = MujocoBatchedEnv(cfg)
    before = kept.reset(seed=0)[0]["rgb_front"].clone()  # kept's context is the current one now
    del dropped
    gc.collect()
    assert torch.equal(kept.reset(seed=0)[0]["rgb_front"], before)
    kept.close()


def test_a_renderer_dropped_while_its_context_is_current_in_a_running_thread_is_kept_not_freed_here():
    # Its context cannot be made current in this thread, so its GL objects cannot be freed from
    # here without deleting the objects of this thread's current context: it is kept instead.
    import gc
    import threading

    from vla_rl.sims.mujoco import rendering

    cfg = EnvConfig(task="pick_place", num_envs=2, cameras=["front"], image_size=32, num_threads=1)
    kept = MujocoBatchedEnv(cfg)
    before = kept.reset(seed=0)[0]["rgb_front"].clone()
    made, finish = threading.Event(), threading.Event()
    owned: dict[str, rendering.WorldRenderer] = {}

    def own_a_renderer() -> None:
        owned["renderer"] = rendering.WorldRenderer(kept.base_model, 32)
        made.set()
        finish.wait(30)

    owner = threading.Thread(target=own_a_renderer)
    owner.start()
    made.wait(30)
    not_freed = len(rendering._NOT_FREED)
    kept.reset(seed=0)  # this thread's current context is kept's again
    del owned["renderer"]
    gc.collect()
    assert len(rendering._NOT_FREED) == not_freed + 1
    assert torch.equal(kept.reset(seed=0)[0]["rgb_front"], before)
    finish.set()
    owner.join()
    kept.close()


def test_a_wider_image_shows_the_square_image_in_its_centre():
    # MuJoCo keeps a camera's vertical field of view, so widening the image adds view at the sides
    # (as a 4:3 camera does): its centre 48x48 is the 48x48 render, up to one level where an edge
    # falls on a pixel (measured at 96 by 128: 0.0001 levels on average).
    cfg = EnvConfig(task="pick_place", num_envs=2, cameras=["front", "wrist"], image_size=48)
    square = MujocoBatchedEnv(cfg)
    wide = MujocoBatchedEnv(dataclasses.replace(cfg, options={"image_width": 64}))
    try:
        expected, got = square.reset(seed=5)[0], wide.reset(seed=5)[0]
        for camera in ("rgb_front", "rgb_wrist"):
            assert got[camera].shape == (2, 48, 64, 3)
            difference = (got[camera][:, :, 8:56].int() - expected[camera].int()).abs()
            assert difference.max() <= 1 and difference.float().mean() < 0.01
            moved = (got[camera][:, :, 9:57].int() - expected[camera].int()).abs().float().mean()
            assert moved > 1.0  # the comparison sees a one-pixel shift
    finally:
        square.close()
        wide.close()


@pytest.mark.parametrize("width", [0, -3, 2.5, True, "64"])
def test_an_image_width_that_is_not_a_pixel_count_is_refused(width):
    with pytest.raises(ValueError, match="options.image_width must be a whole number of pixels"):
        MujocoBatchedEnv(
            EnvConfig(task="reach", num_envs=1, cameras=["front"], options={"image_width": width})
        )
