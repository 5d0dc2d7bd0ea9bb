"""Scripted experts: in-distribution success and the seeded action-noise option.

Success is measured on one batch of 64 worlds per task (split ``train``, seed 7). Offline, over
400 episodes per task (seeds 1000-1007, 50 worlds each) every task scored 400/400; with 64
episodes and a 95 % threshold (at most 3 failures allowed) a policy whose true rate were 90 %
would pass with probability ~11 %, one at 85 % with probability < 1 %.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from vla_rl.sims.mujoco.batched_env import MujocoBatchedEnv
from vla_rl.sims.tasks.registry import TASKS
from vla_rl.sims.tasks.scripted import ScriptedExpert, scripted_action

from vla_rl.envs.config import EnvConfig

NUM_WORLDS = 64


@pytest.mark.parametrize("task", sorted(TASKS))
def test_expert_succeeds_in_distribution(task: str) -> None:
    torch.set_num_threads(1)
    env = MujocoBatchedEnv(EnvConfig(task=task, num_envs=NUM_WORLDS, split="train", num_threads=1))
    expert = ScriptedExpert(task)
    obs, _ = env.reset(seed=7)
    for _ in range(env.max_episode_steps):
        result = env.step(expert(obs))
        obs = result.obs
    env.close()
    assert result.truncated.all()
    success = result.info["episode"]["success"]
    assert success.float().mean().item() >= 0.95, f"{task}: {int(success.sum())}/{NUM_WORLDS} succeeded"


def _lift_obs() -> dict:
    env = MujocoBatchedEnv(EnvConfig(task="lift", num_envs=6, num_threads=1))
    obs, _ = env.reset(seed=3)
    env.close()
    return obs


def test_noise_is_seeded_and_leaves_gripper_clean() -> None:
    obs = _lift_obs()
    executed_a, clean_a = ScriptedExpert("lift", noise_std=0.2, seed=11).act(obs)
    executed_b, clean_b = ScriptedExpert("lift", noise_std=0.2, seed=11).act(obs)
    executed_c, _ = ScriptedExpert("lift", noise_std=0.2, seed=12).act(obs)
    torch.testing.assert_close(executed_a, executed_b, rtol=0, atol=0)
    torch.testing.assert_close(clean_a, clean_b, rtol=0, atol=0)
    assert not torch.equal(executed_a, executed_c)
    torch.testing.assert_close(clean_a, scripted_action("lift", obs), rtol=0, atol=0)
    torch.testing.assert_close(executed_a[:, 3], clean_a[:, 3], rtol=0, atol=0)
    assert not torch.equal(executed_a[:, :3], clean_a[:, :3])
    assert executed_a.abs().max() <= 1.0


def test_noise_matches_the_generator_stream() -> None:
    obs = _lift_obs()
    clean = scripted_action("lift", obs)
    executed, _ = ScriptedExpert("lift", noise_std=0.05, seed=5).act(obs)
    noise = np.random.default_rng(5).normal(0.0, 0.05, (len(clean), 3)).astype(np.float32)
    expected = torch.clamp(clean[:, :3] + torch.from_numpy(noise), -1.0, 1.0)
    torch.testing.assert_close(executed[:, :3], expected, rtol=0, atol=0)


def test_zero_noise_executes_the_clean_action() -> None:
    obs = _lift_obs()
    executed, clean = ScriptedExpert("lift").act(obs)
    assert executed is clean


def test_invalid_expert_settings_are_rejected() -> None:
    with pytest.raises(KeyError, match="no scripted policy"):
        ScriptedExpert("stack")
    with pytest.raises(ValueError, match="noise_std"):
        ScriptedExpert("lift", noise_std=-0.1)
