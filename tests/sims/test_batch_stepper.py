"""The ``mujoco.batch`` stepper: its Jacobian, its agreement with ``mj_step`` per world, snapshots."""

import sys

import mujoco
import numpy as np
import pytest
import torch
from vla_rl.sims.mujoco.batch_stepper import AxisJacobian, load_batch_module
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv

from benchmarks.physics_reference import physics_env_steps_per_s
from vla_rl.envs.config import EnvConfig

pytest.importorskip("mujoco.batch", reason="the batch stepper needs mujoco>=4.0")


def _env(stepper: str, task: str = "push", n: int = 5, **kwargs) -> MujocoBatchedEnv:
    cfg = EnvConfig(task=task, num_envs=n, max_episode_steps=7, options={"stepper": stepper}, **kwargs)
    return MujocoBatchedEnv(cfg)


def _random_actions(env: MujocoBatchedEnv, steps: int, seed: int = 0) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.rand(env.num_envs, env.action_dim, generator=generator) * 2 - 1 for _ in range(steps)]


def test_axis_jacobian_equals_mj_jac_site_at_random_arm_poses():
    env = _env("threads", n=1)
    model, data = env.models[0], env.datas[0]
    rng = np.random.default_rng(0)
    jacobian = AxisJacobian(model, env._tcp_site)
    assert len(jacobian.hinges) == 7 and len(jacobian.slides) == 0  # the arm; fingers are below the TCP
    for _ in range(5):
        data.qpos[env._arm_qadr] = rng.uniform(env.robot.arm_lower, env.robot.arm_upper)
        mujoco.mj_forward(model, data)
        expected = np.zeros((6, model.nv))
        mujoco.mj_jacSite(model, data, expected[:3], expected[3:], env._tcp_site)
        got = np.zeros((1, 6, model.nv))
        jacobian(data.xaxis[None], data.xanchor[None], data.site_xpos[None], got)
        np.testing.assert_allclose(got[0], expected, rtol=0, atol=1e-12)
    env.close()


def test_axis_jacobian_refuses_a_free_joint_above_the_site():
    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom size='0.1'/><site name='tip'/></body>"
        "</worldbody></mujoco>"
    )
    with pytest.raises(ValueError, match="hinge and slide"):
        AxisJacobian(model, 0)


@pytest.mark.parametrize("task", ["reach", "push"])
def test_batch_stepper_follows_mj_step_through_resets(task):
    """Against ``mj_step`` per world (the threads stepper) for 20 steps of random actions with an
    autoreset every 7: the same physics, so the states agree to rounding (the Jacobian computed from
    the joint axes differs from ``mj_jacSite`` in the last bits, and the controller passes that on)."""
    envs = {name: _env(name, task) for name in ("threads", "batch")}
    for env in envs.values():
        env.reset(seed=4)
    autoresets = 0
    for action in _random_actions(envs["threads"], 20):
        results = {name: env.step(action) for name, env in envs.items()}
        autoresets += int(results["batch"].truncated.any())
        for field in ("qpos", "qvel", "sensordata", "tcp_xmat", "jacobian"):
            np.testing.assert_allclose(
                getattr(envs["batch"].readout, field), getattr(envs["threads"].readout, field), atol=1e-9
            )
        torch.testing.assert_close(results["batch"].reward, results["threads"].reward, atol=1e-6, rtol=0)
        assert torch.equal(results["batch"].truncated, results["threads"].truncated)
    assert autoresets == 2, "steps 7 and 14 end every world's episode"
    states = {name: env.state_dict()["physics_state"] for name, env in envs.items()}
    np.testing.assert_allclose(states["batch"], states["threads"], atol=1e-9)
    for env in envs.values():
        env.close()


def test_batch_stepper_with_cameras_is_bit_identical_to_mj_step():
    """With cameras the new states are loaded into each world's ``MjData`` for rendering, so the
    controller reads ``mj_jacSite`` and everything matches bit for bit, images included."""
    envs = {
        name: _env(name, "pick_place", n=3, cameras=["front"], image_size=32) for name in ("threads", "batch")
    }
    for env in envs.values():
        env.reset(seed=2)
    for action in _random_actions(envs["threads"], 9):
        results = {name: env.step(action) for name, env in envs.items()}
        for key in ("proprio", "privileged", "rgb_front"):
            assert torch.equal(results["batch"].obs[key], results["threads"].obs[key]), key
    for env in envs.values():
        env.close()


def test_snapshot_of_a_batch_stepped_env_resumes_exactly():
    env = _env("batch", "push")
    env.reset(seed=1)
    actions = _random_actions(env, 12)
    for action in actions[:5]:
        env.step(action)
    snapshot = env.state_dict()
    continued = [env.step(action).obs["proprio"] for action in actions[5:]]
    env.load_state_dict(snapshot)
    resumed = [env.step(action).obs["proprio"] for action in actions[5:]]
    for a, b in zip(continued, resumed, strict=True):
        assert torch.equal(a, b)
    env.close()


def test_batch_raw_physics_reference_runs_and_unknown_engines_are_named():
    cfg = EnvConfig(task="reach", num_envs=4)
    assert physics_env_steps_per_s(cfg, num_control_steps=3, engine="batch") > 0
    assert physics_env_steps_per_s(cfg, num_control_steps=3, engine="batch", moving=True) > 0
    assert physics_env_steps_per_s(cfg, num_control_steps=3, engine="batch_per_control_step") > 0
    with pytest.raises(ValueError, match="batch, batch_per_control_step, rollout"):
        physics_env_steps_per_s(cfg, num_control_steps=3, engine="euler")


def test_old_mujoco_gets_an_error_naming_the_version_it_needs(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco.batch", None)  # as if mujoco < 4.0 were installed
    monkeypatch.delattr(mujoco, "batch", raising=False)
    with pytest.raises(ImportError, match=r"mujoco>=4.0"):
        load_batch_module()


def test_batch_is_the_default_stepper_where_mujoco_has_it_and_rollout_otherwise(monkeypatch):
    from vla_rl.sims.mujoco import stepping

    assert stepping.DEFAULT_STEPPER == "batch"
    monkeypatch.setitem(sys.modules, "mujoco.batch", None)  # as if mujoco < 4.0 were installed
    monkeypatch.delattr(mujoco, "batch", raising=False)
    assert not stepping._has_batch()
