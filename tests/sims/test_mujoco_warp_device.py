"""MuJoCo Warp with everything above the physics on the device (``options.compute=device``) against
the host path (``options.compute=host``: numpy controllers, rewards and observations, as before).

Both run the same warp physics on warp's CPU device. The device path draws its resets from a torch
generator, so after every reset of the device env (the first, the time-limit autoresets and a partial
reset by ``env_ids``) the host env starts the same worlds from the device env's draw
(``start_from``); the draws' distribution is checked against the host path's in
``test_device_resets.py``. Then both get the same actions (the scripted expert's from the host
observations, with noise), and every step must give the same observations, rewards, success flags,
time limits and episode statistics. The controller and task maths run in float64 on both paths, so
the tolerances are float32 rounding of the physics state, far inside the Warp-vs-CPU-MuJoCo
tolerances of ``test_mujoco_warp.py`` (2 mm TCP, 1 mm objects).
"""

from __future__ import annotations

import pytest
import torch
from vla_rl.sims.tasks.scripted import scripted_action

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.registry import backend_unavailable_reason, make_env

reason = backend_unavailable_reason("mujoco_warp")
pytestmark = pytest.mark.skipif(reason is not None, reason=f"mujoco_warp: {reason}")

DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
    ),
]
EPISODE_STEPS = 8
"""Short episodes, so that two time-limit autoresets happen within the test."""
STEPS = 2 * EPISODE_STEPS + 3
PARTIAL_RESET_STEP, PARTIAL_RESET_WORLDS = 3, [1, 3]
OBS_ATOL = 1e-5
"""float32 observations of the same float32 physics state, computed in float64 on both paths."""


def _env(task: str, compute: str, device: str, control_mode: str):
    cfg = EnvConfig(
        backend="mujoco_warp",
        task=task,
        num_envs=4,
        device=device,
        max_episode_steps=EPISODE_STEPS,
        control_mode=control_mode,
        options={"compute": compute},
    )
    return make_env(cfg)


def _assert_same_obs(host: dict, device: dict, where: str) -> None:
    for key in ("proprio", "privileged", "objects"):
        torch.testing.assert_close(device[key].cpu(), host[key], atol=OBS_ATOL, rtol=0, msg=f"{key} {where}")
    assert device["instruction"] == host["instruction"], where


def _follow_reset(host_env, device_env) -> dict:
    """The host env starts the worlds the device env just reset from the device env's draw."""
    ids, sample = device_env.last_reset
    return host_env.start_from(ids, sample)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    ("task", "control_mode"),
    [
        ("reach", "ee_delta_pos"),
        ("push", "ee_delta_pos"),
        ("lift", "ee_delta_pose"),
        ("pick_place", "joint_delta"),
    ],
)
def test_device_path_matches_the_host_path(task, control_mode, device):
    host_env, device_env = _env(task, "host", "cpu", control_mode), _env(task, "device", device, control_mode)
    host_env.reset(seed=0)
    device_obs, _ = device_env.reset(seed=0)
    host_obs = _follow_reset(host_env, device_env)
    _assert_same_obs(host_obs, device_obs, "after the first reset")
    noise = torch.Generator().manual_seed(1)
    episodes_ended = 0
    for t in range(STEPS):
        if control_mode == "ee_delta_pos":
            action = scripted_action(task, host_obs)
        else:  # the expert speaks ee_delta_pos: random actions exercise the other controllers
            action = torch.zeros(4, host_env.action_dim)
        action = (action + 0.3 * torch.randn(action.shape, generator=noise)).clamp(-1, 1)
        host_step, device_step = host_env.step(action), device_env.step(action.to(device))
        where = f"at step {t}"
        torch.testing.assert_close(device_step.reward.cpu(), host_step.reward, atol=1e-5, rtol=0, msg=where)
        assert torch.equal(device_step.info["success"].cpu(), host_step.info["success"]), where
        assert torch.equal(device_step.truncated.cpu(), host_step.truncated), where
        assert torch.equal(device_step.terminated.cpu(), host_step.terminated), where
        _assert_same_obs(host_step.info["final_obs"], device_step.info["final_obs"], f"final obs {where}")
        host_obs, device_obs = host_step.obs, device_step.obs
        if host_step.done.any():
            episodes_ended += int(host_step.done.sum())
            for key in ("length", "success", "success_once"):
                assert torch.equal(device_step.info["episode"][key].cpu(), host_step.info["episode"][key])
            torch.testing.assert_close(
                device_step.info["episode"]["return"].cpu(),
                host_step.info["episode"]["return"],
                atol=1e-4,
                rtol=0,
            )
            host_obs = _follow_reset(host_env, device_env)
        if t == PARTIAL_RESET_STEP:
            device_obs, _ = device_env.reset(env_ids=torch.tensor(PARTIAL_RESET_WORLDS))
            host_obs = _follow_reset(host_env, device_env)
        _assert_same_obs(host_obs, device_obs, where)
    # Worlds 0 and 2 hit the time limit at steps 7 and 15; worlds 1 and 3, restarted after step 3,
    # at step 11 only.
    assert episodes_ended == 2 + 2 + 1 + 1
    host_env.close()
    device_env.close()


@pytest.mark.parametrize("device", DEVICES)
def test_a_seeded_reset_repeats_on_the_device(device):
    env = _env("pick_place", "device", device, "ee_delta_pos")
    first, _ = env.reset(seed=3)
    env.step(torch.zeros(4, env.action_dim, device=device))
    again, _ = env.reset(seed=3)
    assert torch.equal(first["privileged"], again["privileged"])
    assert first["instruction"] == again["instruction"]
    other, _ = env.reset(seed=4)
    assert not torch.equal(first["privileged"], other["privileged"])
    # One seed per world: each world's draw depends on its seed alone.
    seeds = [[7, world] for world in range(4)]
    per_world, _ = env.reset(seed=seeds)
    env.step(torch.zeros(4, env.action_dim, device=device))
    alone, _ = env.reset(seed=[seeds[2]], env_ids=torch.tensor([2]))
    torch.testing.assert_close(alone["privileged"][2], per_world["privileged"][2], atol=1e-6, rtol=0)
    assert alone["instruction"][2] == per_world["instruction"][2]
    env.close()


@pytest.mark.parametrize("device", DEVICES)
def test_device_snapshot_restores_the_run(device):
    """A snapshot taken mid-episode, restored, gives the same steps (autoreset draws included)."""
    env = _env("push", "device", device, "ee_delta_pos")
    env.reset(seed=5)
    actions = (
        torch.rand(2 * EPISODE_STEPS, 4, env.action_dim, generator=torch.Generator().manual_seed(0)) * 2 - 1
    )
    for action in actions[:4]:
        env.step(action.to(device))
    state = env.state_dict()
    first = [env.step(action.to(device)) for action in actions[4:]]
    env.load_state_dict(state)
    again = [env.step(action.to(device)) for action in actions[4:]]
    for a, b in zip(first, again, strict=True):
        torch.testing.assert_close(a.obs["privileged"], b.obs["privileged"], atol=1e-6, rtol=0)
        torch.testing.assert_close(a.reward, b.reward, atol=1e-6, rtol=0)
        assert torch.equal(a.done, b.done)
    env.close()


def test_device_path_keeps_tensors_on_the_env_device():
    env = _env("lift", "device", "cpu", "ee_delta_pos")
    obs, _ = env.reset(seed=0)
    step = env.step(torch.zeros(4, env.action_dim))
    for value in (*[obs[k] for k in ("proprio", "privileged", "objects")], step.reward, step.truncated):
        assert value.device == env.device
    assert step.reward.dtype == torch.float32 and obs["proprio"].dtype == torch.float32
    env.close()
