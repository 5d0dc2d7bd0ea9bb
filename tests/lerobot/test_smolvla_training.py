"""Training from a LeRobot SmolVLA folder: a tiny SmolVLA that LeRobot built for MuJoCo ``reach``
(one 64-pixel camera, 24 state values, 4 action values) is fine-tuned by ``vla-rl train`` (a
committed Flow-SDE PPO recipe, one update, VLM frozen) and by SFT (``policy.init_from``), and each
checkpoint is again a LeRobot folder whose trained weights moved and whose frozen ones did not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from vla_rl.cli import main
from vla_rl.data.episode import Episode
from vla_rl.policies.flow.smolvla_config import SMOLVLA_TRAINED_WITH_LORA
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.checkpoint import list_checkpoints
from vla_rl.training.sft.config_load import validate_sft_config
from vla_rl.training.sft.trainer import POLICY_DIRNAME, SFTTrainer


@pytest.fixture(scope="module")
def reach_folder(run_lerobot, tmp_path_factory) -> Path:
    """LeRobot's SmolVLA folder for ``reach`` (the reference script's ``reach`` variant)."""
    out = tmp_path_factory.mktemp("smolvla_reach")
    run_lerobot("smolvla_reference.py", out, "reach", out=out / "reference.npz")
    return out / "policy"


def changed_weights(before_dir: Path, after_dir: Path) -> set[str]:
    """LeRobot parameter names whose values differ between two folders' ``model.safetensors``."""
    before = load_file(str(before_dir / "model.safetensors"))
    after = load_file(str(after_dir / "model.safetensors"))
    assert before.keys() == after.keys()
    return {name for name in before if not torch.equal(before[name], after[name])}


def ppo_args(folder: Path, run_dir: Path, *settings: str) -> list[str]:
    """``vla-rl train`` overrides: one small Flow-SDE PPO update of the SmolVLA in ``folder`` on
    ``reach``, checkpointed, with ``settings`` added."""
    return [
        "recipe=pi0_flow_sde_ppo",
        "policy.name=smolvla",
        f"policy.init_from={folder}",
        *settings,
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


def test_flow_sde_ppo_fine_tunes_a_lerobot_smolvla_folder(reach_folder: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ppo_args(
        reach_folder, run_dir, "policy.freeze=[model.vlm.,model.state_proj.]"
    )  # train_expert_only
    assert main(["train", *args]) == 0
    saved = run_dir / "checkpoints" / "iter_000001" / "policy"
    assert (saved / "config.json").is_file() and (saved / "policy_preprocessor.json").is_file()
    changed = changed_weights(reach_folder, saved)
    assert any(name.startswith("model.vlm_with_expert.lm_expert.") for name in changed)
    assert not any(name.startswith(("model.vlm_with_expert.vlm.", "model.state_proj.")) for name in changed)


def test_flow_sde_ppo_with_lora_in_bfloat16_trains_the_adapters_and_keeps_the_base(
    reach_folder: Path, tmp_path: Path
) -> None:
    """``policy.lora`` and ``policy.dtype=bfloat16`` on a LeRobot SmolVLA folder: one update moves the
    adapters and the action projections; the checkpoint's ``model.safetensors`` keeps LeRobot's base
    weights (rounded to bf16) and the adapters lie beside it."""
    run_dir = tmp_path / "run"
    args = ppo_args(
        reach_folder, run_dir, "policy.lora={rank: 4}", "policy.dtype=bfloat16", "policy.freeze=[]"
    )
    assert main(["train", *args]) == 0
    saved = run_dir / "checkpoints" / "iter_000001" / "policy"
    before = load_file(str(reach_folder / "model.safetensors"))
    after = load_file(str(saved / "model.safetensors"))
    assert before.keys() == after.keys()
    moved = {name for name in after if not torch.equal(after[name], before[name].to(after[name].dtype))}
    trained_in_full = tuple(f"model.{prefix}" for prefix in SMOLVLA_TRAINED_WITH_LORA)
    assert all(name.startswith(trained_in_full) for name in moved), sorted(moved)[:5]
    assert "model.action_out_proj.weight" in moved
    assert after["model.vlm_with_expert.lm_expert.norm.weight"].dtype == torch.bfloat16
    adapters = load_file(str(saved / "lora_adapter.safetensors"))
    assert any("lora_B" in name and tensor.abs().sum() > 0 for name, tensor in adapters.items())
    policy = load_chunk_policy("smolvla", saved)
    assert policy.cfg.lora is not None and policy.cfg.lora.rank == 4


def test_sft_from_a_lerobot_smolvla_folder_trains_and_saves_a_lerobot_folder(
    reach_folder: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(0)
    episodes = [
        Episode(
            images={"front": rng.integers(0, 256, (8, 64, 64, 3), dtype=np.uint8)},
            proprio=rng.normal(size=(8, 24)).astype(np.float32),
            actions=rng.uniform(-1, 1, (8, 4)).astype(np.float32),
            instruction="reach the red target",
            success=True,
        )
        for _ in range(2)
    ]
    cfg = validate_sft_config(
        {
            "policy": {"name": "smolvla", "init_from": str(reach_folder)},
            "optim": {"learning_rate": 1e-3, "warmup_steps": 0},
            "eval": {"num_episodes": 0},
            "logger": {"progress_bar": False, "tensorboard": False, "wandb_mode": "disabled"},
            "steps": 2,
            "batch_size": 4,
            "checkpoint_interval": 2,
            "run_dir": str(tmp_path / "sft"),
        }
    )
    result = SFTTrainer(cfg, episodes).train()
    assert all(np.isfinite(metrics["train/loss"]) for metrics in result.history)
    saved = list_checkpoints(tmp_path / "sft" / "checkpoints")[-1] / POLICY_DIRNAME
    changed = changed_weights(reach_folder, saved)
    assert any(name.startswith("model.vlm_with_expert.lm_expert.") for name in changed)
    assert any(name.startswith("model.vlm_with_expert.vlm.model.vision_model.") for name in changed)
    policy = load_chunk_policy("smolvla", saved)
    assert policy.chunk_len == 6 and policy.action_dim == 4
