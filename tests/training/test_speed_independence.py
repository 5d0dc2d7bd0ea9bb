"""Same seed, same config, same weights, whatever the machine's speed: every schedule counts updates
or env steps, and ``max_minutes`` only decides when to stop. Each job runs twice, once with every env
step slowed down, and once more split in two by a resume from its mid-run checkpoint; the weights
must agree to the bit."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from tiny_chunk_rl import chunk_rl_overrides, flow_policy_dir

from vla_rl.config import compose_train_config
from vla_rl.envs import make_env
from vla_rl.training.checkpoint import load_checkpoint, resolve_policy_dir
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer
from vla_rl.training.runner import Trainer

STEP_DELAY_S = 0.004
"""Sleep added to every batched env step of the slow run."""

STATE_PPO = [
    "env.num_envs=8",
    "env.num_threads=1",
    "env.max_episode_steps=20",
    "algorithm.num_steps=8",
    "algorithm.num_minibatches=2",
    "algorithm.num_epochs=2",
    "algorithm.lr_schedule=linear",  # the default's adaptive schedule runs in the chunk tests below
    "algorithm.lr_decay_iterations=6",
    "algorithm.normalize_rewards=true",  # the reward scaler's running statistics must resume too
    "policy.hidden_sizes=[16,16]",
    "logger.progress_bar=false",
    "logger.tensorboard=false",
    "logger.wandb_mode=disabled",
    "eval.num_episodes=0",
    "max_minutes=30",  # a cap far away: the budget code runs, and stops nothing
    "checkpoint_interval=2",
]
"""The default job (PPO on MuJoCo ``reach``) at a few seconds' size: 4 updates of 64 env steps."""
STATE_PPO_UPDATES = 4


def slow_env_steps(monkeypatch: pytest.MonkeyPatch, env_class: type) -> list[int]:
    """Every ``step`` of ``env_class`` sleeps ``STEP_DELAY_S`` first; returns a list that counts them."""
    original = env_class.step
    calls: list[int] = []

    def slow_step(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(1)
        time.sleep(STEP_DELAY_S)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(env_class, "step", slow_step)
    return calls


def state_ppo_weights(run_dir: Path, updates: int, *extra: str) -> dict[str, torch.Tensor]:
    cfg = compose_train_config([*STATE_PPO, f"total_env_steps={updates * 64}", f"run_dir={run_dir}", *extra])
    trainer = Trainer(cfg)
    try:
        result = trainer.train()
    finally:
        trainer.close()
    assert result.iterations == updates and result.stop_reason == "total_env_steps"
    return load_checkpoint(run_dir).policy_state


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert not different, f"weights differ: {different}"


def test_state_ppo_gives_the_same_weights_slowed_down_and_resumed(tmp_path, monkeypatch):
    fast = state_ppo_weights(tmp_path / "fast", STATE_PPO_UPDATES)
    # Resumed from its mid-run checkpoint: 2 updates, then 2 more.
    state_ppo_weights(tmp_path / "split", STATE_PPO_UPDATES // 2)
    resumed = state_ppo_weights(
        tmp_path / "split", STATE_PPO_UPDATES, f"resume={tmp_path / 'split' / 'checkpoints' / 'iter_000002'}"
    )
    assert_same_weights(fast, resumed)
    env_class = type(make_env(compose_train_config(STATE_PPO).env))
    calls = slow_env_steps(monkeypatch, env_class)
    slow = state_ppo_weights(tmp_path / "slow", STATE_PPO_UPDATES)
    assert len(calls) >= STATE_PPO_UPDATES * 8  # every rollout step was slowed
    assert_same_weights(fast, slow)


def schedule_overrides(recipe: str, algorithm: str, init_from: Path, run_dir: Path) -> list[str]:
    """``recipe`` for the tiny flow policy on ``reach``, with every step schedule moving within 4
    updates: the actor's warm-up and decay, the critic's warm-up and the exploration anneal."""
    return [
        *chunk_rl_overrides(run_dir, init_from, recipe, algorithm),
        "++policy.exploration.exploration=flow_sde",
        "++policy.exploration.noise_level=0.5",
        "++policy.exploration_final.noise_level=0.2",
        "policy.exploration_anneal_updates=3",
        "algorithm.num_epochs=2",
        "algorithm.actor_lr_warmup_steps=2",
        "algorithm.actor_lr_decay_steps=10",
        "algorithm.group_size=2",
        "algorithm.keep_success_range=[0.0,1.0]",
        "max_minutes=30",  # a cap far away: the budget code runs, and stops nothing
    ]


def chunk_rl_run(overrides: list[str], updates: int, *extra: str) -> tuple[dict[str, torch.Tensor], list]:
    cfg = compose_rl_config([*overrides, f"iterations={updates}", *extra])
    trainer = ChunkRLTrainer(cfg)
    try:
        result = trainer.train()
    finally:
        trainer.close()
    assert result.iterations == updates and result.stop_reason == "iterations"
    weights = {name: value.detach().clone() for name, value in trainer.policy.state_dict().items()}
    outcomes = [(e["iteration"], e["success_rate"], e["mean_return"]) for e in result.evaluations]
    return weights, outcomes


@pytest.mark.parametrize(
    ("recipe", "algorithm", "critic_warmup"),
    [("pi0_flow_sde_ppo", "vla_ppo", 1), ("token_vla_grpo", "vla_grpo", 0)],
)
def test_chunk_rl_gives_the_same_weights_slowed_down_and_resumed(
    tmp_path, monkeypatch, recipe, algorithm, critic_warmup
):
    init_from = flow_policy_dir(tmp_path)

    def overrides(name: str) -> list[str]:
        return [
            *schedule_overrides(recipe, algorithm, init_from, tmp_path / name),
            f"algorithm.critic_warmup_iterations={critic_warmup}",
        ]

    fast, fast_evaluations = chunk_rl_run(overrides("fast"), 4)
    chunk_rl_run(overrides("split"), 2)
    middle = resolve_policy_dir(tmp_path / "split" / "checkpoints" / "iter_000002").parent
    resumed, resumed_evaluations = chunk_rl_run(overrides("split"), 4, f"resume={middle}")
    assert_same_weights(fast, resumed)
    assert resumed_evaluations == fast_evaluations
    env_class = type(make_env(compose_rl_config([*overrides("probe"), "iterations=1"]).env))
    calls = slow_env_steps(monkeypatch, env_class)
    slow, slow_evaluations = chunk_rl_run(overrides("slow"), 4)
    assert len(calls) >= 4 * 2  # rollouts and evaluations were slowed
    assert_same_weights(fast, slow)
    assert slow_evaluations == fast_evaluations
