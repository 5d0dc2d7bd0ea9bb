"""A reach policy trained by ``vla-rl train`` (about 30 s), shared by the deployment tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REACH_TRAIN_STEPS = 200_000
"""Enough for the default PPO recipe to succeed on nearly every reach episode."""


@pytest.fixture(scope="session")
def reach_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("deploy") / "reach"
    command = [sys.executable, "-m", "vla_rl.cli", "train", f"total_env_steps={REACH_TRAIN_STEPS}"]
    command += [f"run_dir={run_dir}", "eval.video=false", "eval.num_episodes=16", "logger.tensorboard=false"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="session")
def flow_chunk_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small flow policy on reach's proprioception emitting chunks of 8 actions (untrained: it moves
    the arm, which is what the server-failure tests need)."""
    import torch
    from vla_rl.real_world.policy_runner import save_chunk_policy_checkpoint

    from vla_rl.envs.config import EnvConfig
    from vla_rl.policies.registry import build_chunk_policy

    torch.manual_seed(0)
    policy = build_chunk_policy("flow_mlp", chunk_len=8, action_dim=4, proprio_dim=24, hidden_sizes=[32])
    run_dir = tmp_path_factory.mktemp("deploy") / "flow_chunk"
    save_chunk_policy_checkpoint(policy, "flow_mlp", EnvConfig(task="reach"), run_dir)
    return run_dir


@pytest.fixture(scope="module")
def kinematics():  # noqa: ANN201 - ArmKinematics; imported lazily
    """Forward kinematics of the arm from its MJCF."""
    from vla_rl.real_world.kinematics import ArmKinematics

    return ArmKinematics()
