"""SFT from an OpenVLA folder (the stand-in of standin_folder.py) on demonstrations of 4-dim actions
recorded by a ``top`` camera: the maps fit it, the folder's model trains, the checkpoint reloads with
its key and maps; without ``policy.trust_remote_code`` the trainer stops first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.sft.config_load import validate_sft_config
from vla_rl.training.sft.trainer import POLICY_DIRNAME, SFTTrainer


def demonstrations(count: int = 2, steps: int = 4) -> list[Episode]:
    rng = np.random.default_rng(0)
    return [
        Episode(
            images={"top": rng.integers(0, 256, (steps, 24, 24, 3), dtype=np.uint8)},
            proprio=rng.normal(size=(steps, 24)).astype(np.float32),
            actions=rng.uniform(-0.02, 0.03, (steps, 4)).astype(np.float32),
            instruction="pick up the red cube",
            success=True,
        )
        for _ in range(count)
    ]


def sft_config(folder: Path, run_dir: Path, trust: bool = True) -> object:
    return validate_sft_config(
        {
            "policy": {
                "name": "openvla",
                "init_from": str(folder),
                "unnorm_key": "bridge_orig",
                "trust_remote_code": trust,
                "action_map": {"index": [0, 1, 2, 6]},
                "camera_map": {"primary": "top"},
            },
            "eval": {"num_episodes": 0},
            "logger": {"progress_bar": False, "tensorboard": False, "wandb_mode": "disabled"},
            "steps": 2,
            "batch_size": 2,
            "checkpoint_interval": 2,
            "run_dir": str(run_dir),
        }
    )


def test_sft_needs_trust(standin_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="policy.trust_remote_code"):
        SFTTrainer(sft_config(standin_dir, tmp_path, trust=False), demonstrations())


def test_sft_trains_the_folders_model(standin_dir: Path, tmp_path: Path) -> None:
    result = SFTTrainer(sft_config(standin_dir, tmp_path), demonstrations()).train()
    assert all(np.isfinite(metrics["train/loss"]) for metrics in result.history)
    saved = load_chunk_policy("openvla", result.last_checkpoint / POLICY_DIRNAME, trust_remote_code=True)
    assert saved.unnorm_key == "bridge_orig" and saved.action_dim == 4
    start = load_chunk_policy("openvla", standin_dir, unnorm_key="bridge_orig", trust_remote_code=True)
    head = saved.model.language_model.get_output_embeddings().weight
    assert not torch.equal(head, start.model.language_model.get_output_embeddings().weight)
