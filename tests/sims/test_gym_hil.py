"""gym-hil's pick-cube through the gymnasium backend (a worker in .venv-lerobot) and its scripted expert,
on the real gym-hil 0.1.14 and MuJoCo 3.8.1 of that venv."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from vla_rl.sims.gym_hil.env import default_python
from vla_rl.sims.gym_hil.expert import PickCubeExpert

from vla_rl.envs.config import EnvConfig
from vla_rl.envs.gym_adapter import unknown_task_reason
from vla_rl.envs.registry import make_env

TASK = "vla_rl.sims.gym_hil.env:GymHilPickCube-v0"
REPO = Path(__file__).resolve().parents[2]


def _python() -> str:
    configured = os.environ.get("LR_PYTHON")
    python = Path(configured) if configured else default_python()
    if python is None or not python.is_file():
        pytest.skip("gym-hil runs in .venv-lerobot (or LR_PYTHON), absent: `make .venv-lerobot` builds it")
    return str(python)


def _env(num_envs: int, **options: object):
    return make_env(
        EnvConfig(backend="gymnasium", task=TASK, num_envs=num_envs, options={"python": _python(), **options})
    )


def test_task_resolves_without_building_an_env() -> None:
    assert unknown_task_reason(TASK) is None
    assert "No module named" in unknown_task_reason("vla_rl.sims.no_such_module:GymHilPickCube-v0")


def test_env_config_file_is_the_gymnasium_backend() -> None:
    import yaml

    cfg = yaml.safe_load((REPO / "configs" / "env" / "gym_hil_pick_cube.yaml").read_text())
    assert (cfg["backend"], cfg["task"]) == ("gymnasium", TASK)


def test_resets_steps_and_times_out_at_100_steps() -> None:
    env = _env(2)
    try:
        obs, _ = env.reset(seed=0)
        assert obs["proprio"].shape == (2, 18) and obs["privileged"].shape == (2, 3)
        assert torch.allclose(obs["privileged"][0], torch.tensor([0.5, 0.0, 0.02]), atol=1e-5)
        assert env.action_dim == 4 and env.max_episode_steps == 100 and env.control_hz == 10.0
        for _ in range(100):
            result = env.step(torch.zeros(2, 4))
            assert not result.info["success"].any()
        assert result.truncated.all() and not result.terminated.any()
        assert result.info["episode"]["length"].tolist() == [100, 100]
    finally:
        env.close()


@pytest.mark.parametrize("random_block_position", [False, True])
def test_expert_lifts_the_cube(random_block_position: bool) -> None:
    env = _env(2, random_block_position=random_block_position)
    expert = PickCubeExpert(env.num_envs)
    outcomes: list[bool] = []
    try:
        obs, _ = env.reset(seed=3)
        while len(outcomes) < 4:
            result = env.step(expert.act(obs)[0])
            for world in result.done.nonzero().flatten().tolist():
                outcomes.append(bool(result.info["episode"]["success"][world]))
                assert result.terminated[world], "success ends the episode before the time limit"
            obs = result.obs
    finally:
        env.close()
    assert all(outcomes)
