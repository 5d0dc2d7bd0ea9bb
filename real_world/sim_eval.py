"""Direct evaluation of a loaded policy on the simulated robot's seeds: the number a deployment over a
transport is compared with (same seeds, same worlds, no transport, no safety layer)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch
from vla_rl.real_world.policy_runner import LoadedPolicy


@torch.no_grad()
def evaluate_on_seeds(
    loaded: LoadedPolicy,
    seeds: list[int],
    sim_image_size: int = 0,
    sim_image_width: int = 0,
    crops: Mapping[str, Sequence[int]] | None = None,
) -> list[bool]:
    """Success at the end of one episode per seed (what ``vla-rl eval`` counts as success). With
    ``sim_image_size`` and ``sim_image_width`` the cameras render at that height and width, and each
    frame is cropped to its camera's region in ``crops`` (``[top, left, height, width]``) and resized
    to the policy's size as the ROS robots do (``robot.sim_image_size``, ``robot.sim_image_width``,
    ``robot.image_crops``, without a transport)."""
    from vla_rl.real_world.camera_view import CameraViews
    from vla_rl.real_world.sim_robot import camera_env
    from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

    size = loaded.env.image_size
    env = MujocoBatchedEnv(
        camera_env(dataclasses.replace(loaded.env, num_envs=1), sim_image_size, sim_image_width)
    )
    views = CameraViews((size, size), crops or {})

    def as_trained(obs: dict) -> dict:
        if not (sim_image_size or sim_image_width or crops):
            return obs
        frames = views({camera: obs[f"rgb_{camera}"][0].numpy() for camera in loaded.env.cameras})
        return {**obs, **{f"rgb_{camera}": torch.from_numpy(f)[None] for camera, f in frames.items()}}

    successes = []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            while True:
                action = loaded.policy.act(as_trained(obs), deterministic=True).action.clamp(-1.0, 1.0)
                result = env.step(action)
                if "episode" in result.info:
                    successes.append(bool(result.info["episode"]["success"][0]))
                    break
                obs = result.obs
    finally:
        env.close()
    return successes
