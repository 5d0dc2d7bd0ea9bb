"""Raw physics throughput of a task (``mujoco.rollout`` or ``mujoco.batch``), the yardstick for
``env.step`` speed."""

from __future__ import annotations

import dataclasses
import time

import mujoco
import numpy as np
import torch
from mujoco import rollout
from vla_rl.sims.mujoco.stepping import HAS_MUJOCO_BATCH

from vla_rl.envs.config import EnvConfig

ENGINES = ("rollout", "batch") if HAS_MUJOCO_BATCH else ("rollout",)
"""The raw-physics engines this MuJoCo has (``mujoco.batch`` from 4.0 on), each stepping all control
steps in one call."""
STEPWISE_ENGINE = "batch_per_control_step"
"""``mujoco.batch`` called once per control step, as a closed loop must (not the target's yardstick:
one call over all steps runs each world's substeps back to back with its data in the cache)."""


def physics_env_steps_per_s(
    cfg: EnvConfig,
    num_control_steps: int = 50,
    nthread: int | None = None,
    moving: bool = False,
    seed: int = 0,
    engine: str = "rollout",
) -> float:
    """Env-steps per second of pure physics for ``cfg``'s task: the same per-world models, the same
    substeps per control step, ``cfg.num_envs`` worlds from their reset states, stepped by one call
    on ``nthread`` (default ``cfg.num_threads``) threads: ``mujoco.rollout`` (``engine="rollout"``)
    or ``mujoco.batch.Batch.rollout`` (``engine="batch"``, MuJoCo >= 4.0, which recomputes nothing
    else either), or the batch called once per control step (``STEPWISE_ENGINE``). No controller,
    observations, rewards or rendering.

    The controls hold the home posture, or with ``moving`` replay the actuator targets the env's
    own controller produced for uniformly random actions (recorded first, untimed): the arm then
    moves as it does in training, a different workload for the solver than standing still.
    """
    from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

    env = MujocoBatchedEnv(dataclasses.replace(cfg, cameras=[], max_episode_steps=10**9))
    try:
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        size = mujoco.mj_stateSize(env.base_model, spec)
        initial = np.zeros((env.num_envs, size))
        for i, (m, d) in enumerate(zip(env.models, env.datas, strict=True)):
            mujoco.mj_getState(m, d, initial[i], spec)
        home = np.stack([d.ctrl.copy() for d in env.datas])
        if moving:
            generator = torch.Generator().manual_seed(seed)
            per_step = []
            for _ in range(num_control_steps):
                env.step(torch.rand((env.num_envs, env.action_dim), generator=generator) * 2 - 1)
                per_step.append(env.actuator_targets.copy())
            control = np.repeat(np.stack(per_step, axis=1), env.substeps, axis=1)
        else:
            control = np.repeat(home[:, None], num_control_steps * env.substeps, axis=1)
        threads = nthread or cfg.num_threads
        if engine in ("batch", STEPWISE_ENGINE):
            seconds = _batch_seconds(env, control, threads, per_control_step=engine == STEPWISE_ENGINE)
            return env.num_envs * num_control_steps / seconds
        if engine != "rollout":
            allowed = ", ".join(sorted({*ENGINES, STEPWISE_ENGINE}))
            raise ValueError(f"unknown engine {engine!r}; allowed: {allowed}")
        datas = [mujoco.MjData(env.base_model) for _ in range(threads)]
        nstep = num_control_steps * env.substeps
        with rollout.Rollout(nthread=threads) as runner:
            runner.rollout(env.models, datas, initial, control[:, : env.substeps], nstep=env.substeps)
            start = time.perf_counter()
            runner.rollout(env.models, datas, initial, control, nstep=nstep)
            elapsed = time.perf_counter() - start
        return env.num_envs * num_control_steps / elapsed
    finally:
        env.close()


def fastest_physics_env_steps_per_s(cfg: EnvConfig, moving: bool = False) -> float:
    """The higher of the engines' raw-physics rates, measured one after the other: the yardstick
    that no stepper's ``env.step`` can beat."""
    return max(physics_env_steps_per_s(cfg, moving=moving, engine=engine) for engine in ENGINES)


def _batch_seconds(env, control: np.ndarray, threads: int, per_control_step: bool = False) -> float:  # noqa: ANN001
    """Seconds of one ``Batch.rollout`` call over ``control`` [N, steps, nu] from the reset states, or
    with ``per_control_step`` of one call per control step (``env.substeps`` substeps each)."""
    from vla_rl.sims.mujoco.batch_stepper import STATE_SPEC, load_batch_module

    batch = load_batch_module().Batch(env.base_model, nsim=env.num_envs, nthread=threads, persistent=True)
    batch.set_models(env.models)
    initial = np.zeros_like(batch.state)
    for i, (m, d) in enumerate(zip(env.models, env.datas, strict=True)):
        mujoco.mj_getState(m, d, initial[i], STATE_SPEC)
    batch.state[:] = initial
    batch.rollout(env.substeps, control[:, : env.substeps], record=())  # warm-up
    batch.state[:] = initial
    start = time.perf_counter()
    if per_control_step:
        for first in range(0, control.shape[1], env.substeps):
            batch.rollout(env.substeps, control[:, first : first + env.substeps], record=())
    else:
        batch.rollout(control.shape[1], control, record=())
    return time.perf_counter() - start
