"""Direct evaluation of a loaded policy on the simulated robot's seeds: the number a deployment over a
transport is compared with (same seeds, same worlds, no transport, no safety layer)."""

from __future__ import annotations

import dataclasses

import torch
from vla_rl.real_world.policy_runner import LoadedPolicy


@torch.no_grad()
def evaluate_on_seeds(loaded: LoadedPolicy, seeds: list[int], sim_image_size: int = 0) -> list[bool]:
    """Success at the end of one episode per seed (what ``vla-rl eval`` counts as success). With
    ``sim_image_size`` the cameras render at that many pixels a side and each frame is resized to
    the policy's size as the ROS robots do (``robot.sim_image_size``, without a transport)."""
    from vla_rl.real_world.camera_view import policy_view
    from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

    size = loaded.env.image_size
    env = MujocoBatchedEnv(dataclasses.replace(loaded.env, num_envs=1, image_size=sim_image_size or size))

    def as_trained(obs: dict) -> dict:
        if not sim_image_size:
            return obs
        resized = dict(obs)
        for key in (f"rgb_{camera}" for camera in loaded.env.cameras):
            resized[key] = torch.from_numpy(policy_view(obs[key][0].numpy(), (size, size)))[None]
        return resized

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
