"""The pieces of "RL from an imported LeRobot pi0" connect: a LeRobot v3.0 dataset that ``vla-rl collect``
wrote is trained on by LeRobot's own training code (``lerobot_train.train``, two optimiser steps, a tiny
pi0 at reduced width), and ``vla-rl train recipe=pi0_flow_sde_ppo`` makes one update from the policy
folder LeRobot saved; on the way, that folder's action chunks in vla-rl equal LeRobot's own on frames of
the dataset for the same noise. ``benchmarks/lerobot_pi0_rl.py`` runs the same chain at full budget.

LeRobot 0.4's pi0 needs openpi's ``transformers_replace`` files: give an openpi checkout in
``OPENPI_DIR`` (``OPENPI_DIR=... make test-lerobot``); without it the test skips.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from vla_rl.cli import main
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.lerobot_folder import read_lerobot_folder
from vla_rl.policies.registry import load_chunk_policy

IMAGE_SIDE = 32
TOLERANCE = 1e-4
"""max |vla-rl - LeRobot| of the action chunks (float32), as the parity tests."""
ENV = ("env=reach", "env.cameras=[front]", f"env.image_size={IMAGE_SIDE}", "env.max_episode_steps=16")


def collect_v3(root: Path) -> None:
    args = [*ENV, "env.num_envs=2", "num_episodes=2", "keep_failures=true", "record_privileged=false"]
    assert main(["collect", *args, f"output_dir={root}"]) == 0
    assert json.loads((root / "meta" / "info.json").read_text())["codebase_version"] == "v3.0"


def test_lerobot_sft_folder_starts_flow_sde_ppo(
    openpi_dir: Path, run_lerobot: Callable[..., dict[str, np.ndarray]], tmp_path: Path
) -> None:
    dataset, out = tmp_path / "dataset", tmp_path / "lerobot"
    collect_v3(dataset)
    sft = run_lerobot(
        "lerobot_pi0_sft.py",
        "--openpi",
        openpi_dir,
        "--dataset",
        dataset,
        "--out",
        out,
        "--steps",
        2,
        "--batch-size",
        4,
        "--image-side",
        IMAGE_SIDE,
        out=out / "sft.npz",
    )
    assert sft["loss"].shape == (2,) and np.isfinite(sft["loss"]).all()

    folder = out / "train" / "checkpoints" / "last" / "pretrained_model"
    imported = read_lerobot_folder(folder)
    assert imported.policy_type == "pi0"
    assert imported.input_features["observation.state"].shape == (24,)
    assert imported.output_features["action"].shape == (4,)
    dataset_stats = json.loads((dataset / "meta" / "stats.json").read_text())
    for key in ("observation.state", "action"):  # LeRobot normalises with the collected data's statistics
        for name in ("mean", "std"):
            np.testing.assert_allclose(imported.stats[key][name], dataset_stats[key][name], rtol=1e-6)

    # The trained folder acts in vla-rl as in LeRobot: frames LeRobot's dataset reader decoded, same noise.
    reference = run_lerobot(
        "lerobot_pi0_actions.py",
        "--openpi",
        openpi_dir,
        "--folder",
        folder,
        "--tokenizer",
        out / "tokenizer",
        "--dataset",
        dataset,
        "--out",
        tmp_path / "actions.npz",
        out=tmp_path / "actions.npz",
    )
    policy = Pi0Policy.from_pretrained(str(folder), tokenizer_dir=str(out / "tokenizer")).eval()
    obs = {
        "rgb_front": reference["rgb_front"],
        "proprio": torch.as_tensor(reference["state"]),
        "instruction": [str(text) for text in reference["instructions"]],
    }
    actions = policy.predict_action_chunk(obs, torch.as_tensor(reference["noise"]))
    assert actions.shape == reference["actions"].shape
    assert float(np.abs(actions.numpy() - reference["actions"]).max()) < TOLERANCE

    run_dir = tmp_path / "rl"
    args = [
        "recipe=pi0_flow_sde_ppo",
        "policy.name=pi0",
        f"policy.init_from={folder}",
        f"policy.tokenizer_dir={out / 'tokenizer'}",
        *ENV,
        "env.num_envs=2",
        "env.num_threads=1",
        "algorithm.num_decisions=2",
        "algorithm.num_minibatches=2",
        "algorithm.num_epochs=1",
        "algorithm.critic_warmup_iterations=0",  # the recipe trains the critic alone at first
        "algorithm.actor_lr_warmup_steps=0",
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
    before = load_chunk_policy("pi0", folder, tokenizer_dir=str(out / "tokenizer")).state_dict()
    after = load_chunk_policy("pi0", run_dir / "checkpoints" / "iter_000001" / "policy").state_dict()
    assert before.keys() <= after.keys()
    changed = {name for name in before if not torch.equal(before[name], after[name])}
    assert any(name.startswith("model.model.dit.") for name in changed), sorted(changed)  # action expert
    assert not any(name.startswith("model.model.vlm.") for name in changed)  # the recipe freezes the VLM
