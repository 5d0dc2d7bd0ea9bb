"""Direct evaluation of a loaded policy on the simulated robot's seeds: the number a deployment over a
transport is compared with (same seeds, same worlds, no transport, no safety layer)."""

from __future__ import annotations

import dataclasses

import torch
from vla_rl.real_world.policy_runner import LoadedPolicy


@torch.no_grad()
def evaluate_on_seeds(loaded: LoadedPolicy, seeds: list[int]) -> list[bool]:
    """Success at the end of one episode per seed (what ``vla-rl eval`` counts as success)."""
    from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

    env = MujocoBatchedEnv(dataclasses.replace(loaded.env, num_envs=1))
    successes = []
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            while True:
                action = loaded.policy.act(obs, deterministic=True).action.clamp(-1.0, 1.0)
                result = env.step(action)
                if "episode" in result.info:
                    successes.append(bool(result.info["episode"]["success"][0]))
                    break
                obs = result.obs
    finally:
        env.close()
    return successes
