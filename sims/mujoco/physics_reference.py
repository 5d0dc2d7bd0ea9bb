"""Raw physics throughput of a task (``mujoco.rollout``), the yardstick for ``env.step`` speed."""

from __future__ import annotations

import dataclasses
import time

import mujoco
import numpy as np
from mujoco import rollout

from vla_rl.envs.config import EnvConfig


def physics_env_steps_per_s(cfg: EnvConfig, num_control_steps: int = 50, nthread: int | None = None) -> float:
    """Env-steps per second of pure physics for ``cfg``'s task: the same per-world models, the same
    substeps per control step, ``cfg.num_envs`` worlds from their reset states, constant controls
    holding the home posture, stepped by ``mujoco.rollout`` on ``nthread`` (default
    ``cfg.num_threads``) threads. No controller, observations, rewards or rendering."""
    from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

    env = MujocoBatchedEnv(dataclasses.replace(cfg, cameras=[]))
    try:
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        size = mujoco.mj_stateSize(env.base_model, spec)
        initial = np.zeros((env.num_envs, size))
        for i, (m, d) in enumerate(zip(env.models, env.datas, strict=True)):
            mujoco.mj_getState(m, d, initial[i], spec)
        nstep = num_control_steps * env.substeps
        control = np.repeat(np.stack([d.ctrl.copy() for d in env.datas])[:, None], nstep, axis=1)
        threads = nthread or cfg.num_threads
        datas = [mujoco.MjData(env.base_model) for _ in range(threads)]
        with rollout.Rollout(nthread=threads) as runner:
            runner.rollout(env.models, datas, initial, control[:, : env.substeps], nstep=env.substeps)
            start = time.perf_counter()
            runner.rollout(env.models, datas, initial, control, nstep=nstep)
            elapsed = time.perf_counter() - start
        return env.num_envs * num_control_steps / elapsed
    finally:
        env.close()


measure_physics_throughput = physics_env_steps_per_s
"""Alias of ``physics_env_steps_per_s``."""
