"""The two physics steppers of the MuJoCo batched env."""

import mujoco
import numpy as np
import pytest
import torch
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv
from vla_rl.sims.mujoco.steppers import STEPPERS
from vla_rl.sims.mujoco.stepping import RolloutStepper, ThreadedStepper
from vla_rl.sims.tasks.scripted import scripted_action

from vla_rl.envs.config import EnvConfig


def _env(stepper: str, n: int = 4) -> MujocoBatchedEnv:
    return MujocoBatchedEnv(EnvConfig(task="push", num_envs=n, num_threads=2, options={"stepper": stepper}))


def _serial(fn, ids):
    fn(ids)


def _no_refresh(ids):
    pass


def test_rollout_stepper_equals_mj_step_from_a_cold_warm_start():
    """The only difference from ``mj_step`` is the cold solver warm start, so with it zeroed the
    two are bit-identical."""
    env = _env("threads", n=3)
    env.reset(seed=1)
    models, substeps = env.models, env.substeps
    rng = np.random.default_rng(0)
    ctrl = env._ctrl + rng.normal(0.0, 0.05, env._ctrl.shape)
    cold = [mujoco.MjData(m) for m in models]
    via_rollout = [mujoco.MjData(m) for m in models]
    for m, d, a, b in zip(models, env.datas, cold, via_rollout, strict=True):
        for copy in (a, b):
            mujoco.mj_copyData(copy, m, d)
    for m, d, c in zip(models, cold, ctrl, strict=True):
        d.qacc_warmstart[:] = 0.0
        d.ctrl[:] = c
        mujoco.mj_step(m, d, substeps)
    stepper = RolloutStepper(models, substeps, num_threads=2)
    stepper.states_changed(via_rollout, np.arange(len(models)))
    stepper.advance(via_rollout, ctrl, _serial, _no_refresh)
    stepper.close()
    for a, b in zip(cold, via_rollout, strict=True):
        np.testing.assert_array_equal(a.qpos, b.qpos)
        np.testing.assert_array_equal(a.qvel, b.qvel)
        np.testing.assert_array_equal(a.act, b.act)
    env.close()


def test_steppers_agree_on_a_contact_rich_push_within_solver_tolerance():
    """The scripted expert pushes the cube for 40 steps under each stepper; the cube ends up in
    the same place to within 10 micrometres (cold vs warm solver start changes contact forces
    only within the solver tolerance)."""
    cube_xyz_m = {}
    for name in STEPPERS:
        env = _env(name)
        obs, _ = env.reset(seed=3)
        start = obs["privileged"][:, 0:3].clone()
        for _ in range(40):
            obs = env.step(scripted_action("push", obs)).obs
        cube_xyz_m[name] = obs["privileged"][:, 0:3]
        env.close()
    moved_m = (cube_xyz_m["threads"] - start).norm(dim=1)
    assert (moved_m > 0.02).all(), "the expert must actually push the cube for this to test contact"
    torch.testing.assert_close(cube_xyz_m["rollout"], cube_xyz_m["threads"], atol=1e-5, rtol=0)


def test_threaded_stepper_matches_plain_mj_step():
    env = _env("threads", n=2)
    env.reset(seed=0)
    copies = [mujoco.MjData(m) for m in env.models]
    for m, d, c, ctrl in zip(env.models, env.datas, copies, env._ctrl, strict=True):
        mujoco.mj_copyData(c, m, d)
        c.ctrl[:] = ctrl
        mujoco.mj_step(m, c, env.substeps)
    ThreadedStepper(env.models, env.substeps, 2).advance(env.datas, env._ctrl, _serial, _no_refresh)
    for a, b in zip(copies, env.datas, strict=True):
        np.testing.assert_array_equal(a.qpos, b.qpos)
    env.close()


def test_unknown_stepper_names_the_choices():
    with pytest.raises(ValueError, match="rollout") as err:
        _env("euler")
    assert "euler" in str(err.value)


def test_rollout_stepper_follows_resets_and_restores():
    """The rollout stepper starts each control step from the state it produced last, so it must
    pick up worlds changed in between: a reset of one world, autoresets at staggered steps (a
    5-step time limit) and ``load_state_dict``. It then tracks the ``threads`` stepper (which steps
    the MjData itself) on ``reach``."""
    trajectories = {}
    for name in STEPPERS:
        env = MujocoBatchedEnv(
            EnvConfig(task="reach", num_envs=3, max_episode_steps=5, options={"stepper": name})
        )
        obs, _ = env.reset(seed=5)
        snapshot = env.state_dict()
        tcp = []
        for step in range(12):
            if step == 3:
                obs, _ = env.reset(seed=9, env_ids=torch.tensor([1]))
            if step == 8:
                obs = env.load_state_dict(snapshot)
            obs = env.step(scripted_action("reach", obs)).obs
            tcp.append(obs["proprio"][:, 15:18].clone())
        trajectories[name] = torch.stack(tcp)
        env.close()
    # Restored at step 8 to the first reset state: steps 8, 9, 10 repeat steps 0, 1, 2.
    torch.testing.assert_close(trajectories["rollout"][8:11], trajectories["rollout"][:3])
    torch.testing.assert_close(trajectories["rollout"], trajectories["threads"], atol=1e-5, rtol=0)
