"""RL from a LeRobot SmolVLA folder through ``vla-rl train``: a tiny SmolVLA that LeRobot built for
MuJoCo ``reach`` (one 64-pixel camera, 24 state values, 4 action values) is fine-tuned by a
committed Flow-SDE PPO recipe for one update with its VLM frozen, and the checkpoint is again a
LeRobot folder whose expert moved and whose VLM did not."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from vla_rl.cli import main


def test_flow_sde_ppo_fine_tunes_a_lerobot_smolvla_folder(run_lerobot, tmp_path: Path) -> None:
    out = tmp_path / "lerobot"
    out.mkdir()
    run_lerobot("smolvla_reference.py", out, "reach", out=out / "reference.npz")
    run_dir = tmp_path / "run"
    args = [
        "recipe=pi0_flow_sde_ppo",
        "policy.name=smolvla",
        f"policy.init_from={out / 'policy'}",
        "policy.freeze=[model.vlm.,model.state_proj.]",  # LeRobot's train_expert_only
        "algorithm.num_decisions=2",
        "algorithm.num_minibatches=2",
        "algorithm.num_epochs=1",
        "algorithm.critic_warmup_iterations=0",  # the recipe trains the critic alone at first
        "algorithm.actor_lr_warmup_steps=0",
        "env=reach",
        "env.cameras=[front]",
        "env.num_envs=2",
        "env.num_threads=1",
        "env.max_episode_steps=8",
        "eval.num_episodes=0",
        "checkpoint_interval=1",
        "iterations=1",
        "torch_num_threads=1",
        "logger.progress_bar=false",
        "logger.tensorboard=false",
        "logger.wandb_mode=disabled",
        f"run_dir={run_dir}",
    ]
    assert main(["train", *args]) == 0
    saved = run_dir / "checkpoints" / "iter_000001" / "policy"
    assert (saved / "config.json").is_file() and (saved / "policy_preprocessor.json").is_file()
    before = load_file(str(out / "policy" / "model.safetensors"))
    after = load_file(str(saved / "model.safetensors"))
    assert before.keys() == after.keys()
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert any(name.startswith("model.vlm_with_expert.lm_expert.") for name in changed)
    assert not any(name.startswith(("model.vlm_with_expert.vlm.", "model.state_proj.")) for name in changed)
