"""A tiny flow policy and the overrides that fine-tune it with a committed recipe on MuJoCo ``reach``
in seconds (4 worlds, episodes of 8 steps, 2 decisions per update, 2 evaluation episodes)."""

from __future__ import annotations

from pathlib import Path

import torch

from vla_rl.policies.registry import build_chunk_policy

PROPRIO_DIM = 24
"""``reach``'s proprioception width, the flow policy's input."""


def flow_policy_dir(tmp_path: Path) -> Path:
    """A freshly initialised (seed 0) ``flow_mlp`` saved as the run's ``policy.init_from``."""
    torch.manual_seed(0)
    policy = build_chunk_policy(
        "flow_mlp",
        chunk_len=4,
        action_dim=4,
        proprio_dim=PROPRIO_DIM,
        hidden_sizes=[32],
        num_denoising_steps=3,
    )
    directory = tmp_path / "sft_policy"
    policy.save_pretrained(directory)
    return directory


def quiet_run_overrides(run_dir: Path) -> list[str]:
    """What every tiny test run sets: a checkpoint per update, one thread, no progress bar, no
    TensorBoard or W&B, its folder ``run_dir``."""
    return [
        "checkpoint_interval=1",
        "torch_num_threads=1",
        "logger.progress_bar=false",
        "logger.tensorboard=false",
        "logger.wandb_mode=disabled",
        f"run_dir={run_dir}",
    ]


def chunk_rl_overrides(run_dir: Path, init_from: Path, recipe: str, algorithm: str) -> list[str]:
    """``recipe`` with ``algorithm`` for the tiny flow policy (add ``iterations=`` and the rest)."""
    return [
        f"recipe={recipe}",
        f"algorithm.name={algorithm}",
        "policy.name=flow_mlp",
        f"policy.init_from={init_from}",
        "policy.freeze=[]",  # the pi0 recipes freeze pi0's prefix
        "algorithm.log_prob_level=chunk",
        "algorithm.num_decisions=2",
        "algorithm.num_minibatches=2",
        "env=reach",
        "env.cameras=[]",
        "env.num_envs=4",
        "env.num_threads=1",
        "env.max_episode_steps=8",
        "eval.num_episodes=2",
        "eval.interval=1",
        *quiet_run_overrides(run_dir),
    ]


def overrides(
    run_dir: Path, init_from: Path, recipe: str = "pi0_flow_sde", algorithm: str = "vla_ppo"
) -> list[str]:
    """A two-update run of ``recipe`` (Flow-SDE PPO by default) for the tiny flow policy."""
    return [*chunk_rl_overrides(run_dir, init_from, recipe, algorithm), "iterations=2"]
