"""The Gymnasium tutorial's commands, at tiny sizes: wrap a MuJoCo Gymnasium env, train, load.

Each run is exactly ``vla-rl train env.backend=gymnasium env.task=<id>`` plus size overrides (and
``run_dir``): no policy key is named, the policy reads what the env provides.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vla_rl.cli import EXIT_CONFIG_ERROR, main
from vla_rl.config import load_train_config_file
from vla_rl.envs import make_env
from vla_rl.training.checkpoint import CONFIG_FILENAME, load_trained_actor_critic, resolve_checkpoint_dir

TUTORIAL = ["train", "env.backend=gymnasium"]
"""``vla-rl train env.backend=gymnasium env.task=<id>``: the tutorial's command."""
TINY = ["env.num_envs=2", "algorithm.num_steps=16", "total_env_steps=64", "eval.num_episodes=2"]
"""Size overrides only: 2 worlds, 2 iterations of 32 steps, 2 evaluation episodes."""


@pytest.mark.parametrize(("task", "obs_dim", "action_dim"), [("Reacher-v5", 10, 2), ("Pusher-v5", 23, 7)])
def test_tutorial_command_trains_a_policy_that_loads(
    task: str, obs_dim: int, action_dim: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    run_dir = tmp_path / "run"
    code = main([*TUTORIAL, f"env.task={task}", *TINY, f"run_dir={run_dir}"])
    assert code == 0

    checkpoint = resolve_checkpoint_dir(run_dir)
    assert checkpoint.name == "iter_000002"
    cfg = load_train_config_file(checkpoint / CONFIG_FILENAME)
    assert cfg.policy.actor_obs_keys == ["proprio"]  # the saved config names what the run read
    policy = load_trained_actor_critic(cfg, checkpoint)
    assert policy.actor_keys == ["proprio"]
    assert policy.obs_encoder.dims == {"proprio": obs_dim}

    env = make_env(cfg.env)
    try:
        obs, _ = env.reset(seed=0)
        with torch.no_grad():
            step = policy.act(obs, deterministic=True)
        assert step.action.shape == (2, action_dim)
        env.step(step.action)
    finally:
        env.close()


def test_an_explicit_key_the_env_lacks_is_a_config_error_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    code = main(
        [*TUTORIAL, "env.task=Reacher-v5", *TINY, f"run_dir={run_dir}", "policy.actor_obs_keys=[privileged]"]
    )
    assert code == EXIT_CONFIG_ERROR
    message = capsys.readouterr().err
    assert "policy.actor_obs_keys" in message and "'privileged'" in message and "['proprio']" in message
    assert not (run_dir / "checkpoints").exists()


def test_an_unknown_gymnasium_id_is_a_config_error_naming_env_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*TUTORIAL, "env.task=Reachr-v5", *TINY, f"run_dir={tmp_path / 'run'}"])
    assert code == EXIT_CONFIG_ERROR
    message = capsys.readouterr().err
    assert "'env.task'" in message and "Did you mean: `Reacher`" in message
