"""The tiny RL run the import tests share: Flow-SDE PPO of an imported pi0 on MuJoCo ``reach``."""

from __future__ import annotations

from pathlib import Path

from tiny_chunk_rl import quiet_run_overrides


def reach_run_overrides(run_dir: Path, *settings: str) -> list[str]:
    """A tiny Flow-SDE PPO run on ``reach`` (cameras top and wrist at 32 pixels, 4 worlds, episodes of
    8 steps, 2 decisions per update, 2 evaluation episodes) with ``settings`` (the folder, its
    tokenizer, the maps); add ``iterations=``."""
    return [
        "recipe=pi0_flow_sde_ppo",
        *settings,
        "algorithm.num_decisions=2",
        "algorithm.num_minibatches=2",
        "algorithm.num_epochs=1",
        "algorithm.critic_warmup_iterations=0",  # the recipe trains the critic alone first
        "env=reach",
        "env.cameras=[top,wrist]",
        "env.image_size=32",
        "env.num_envs=4",
        "env.num_threads=1",
        "env.max_episode_steps=8",
        "eval.num_episodes=2",
        "eval.num_envs=2",
        *quiet_run_overrides(run_dir),
    ]
