"""Raw MuJoCo Warp physics throughput of a task: the yardstick for the warp backend's ``env.step``
and rollout, as ``benchmarks.physics_reference`` is for the CPU backend."""

from __future__ import annotations

import dataclasses
import time

import torch
import warp as wp

from vla_rl.envs.config import EnvConfig


def warp_physics_env_steps_per_s(
    cfg: EnvConfig, num_control_steps: int = 50, moving: bool = False, seed: int = 0
) -> float:
    """Env-steps per second of the warp substeps alone for ``cfg``'s task and worlds: the same
    batched model and substeps as the env (replayed as a CUDA graph on a GPU), no controller,
    observations, rewards, resets or reading back.

    The controls hold the home posture, or with ``moving`` replay the actuator targets the env's
    own controller produced for uniformly random actions (recorded first, untimed; written on the
    device before each control step, as the env does).
    """
    from vla_rl.sims.mujoco_warp.batched_env import MujocoWarpBatchedEnv

    env = MujocoWarpBatchedEnv(dataclasses.replace(cfg, cameras=[], max_episode_steps=10**9))
    try:
        env.reset(seed=seed)
        physics = env.physics
        ctrl = physics.view["ctrl"]
        if moving:
            generator = torch.Generator().manual_seed(seed)
            targets = []
            for _ in range(num_control_steps):
                env.step(torch.rand((env.num_envs, env.action_dim), generator=generator) * 2 - 1)
                targets.append(torch.from_numpy(env.actuator_targets.copy()).to(ctrl))
        else:
            targets = [ctrl.clone()] * num_control_steps
        physics.step_controls(targets[0])  # warm-up (records the graph on CUDA)
        wp.synchronize_device(physics.device)
        start = time.perf_counter()
        for target in targets:
            physics.step_controls(target)
        wp.synchronize_device(physics.device)
        return env.num_envs * num_control_steps / (time.perf_counter() - start)
    finally:
        env.close()
