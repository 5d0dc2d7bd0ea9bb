"""SFT from a LeRobot pi0 folder (``policy.init_from``) on demonstrations of other widths and cameras:
the maps fit the checkpoint to them, and without a needed map the trainer stops before its first step
with a ``ConfigError`` naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.sft.config_load import validate_sft_config
from vla_rl.training.sft.trainer import POLICY_DIRNAME, SFTTrainer

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot" / "pi0"
MAPS = {
    "action_map": {"index": [0, 1, 2, 6]},
    "state_map": {"index": [15, 16, 17, None, None, None, 14, 14]},
    "camera_map": {"front": "top"},
}


def demonstrations(count: int = 2, steps: int = 6) -> list[Episode]:
    """Episodes as ``reach`` with cameras top and wrist records them: 24-wide proprio, 4 actions."""
    rng = np.random.default_rng(0)
    return [
        Episode(
            images={
                name: rng.integers(0, 256, (steps, 32, 32, 3), dtype=np.uint8) for name in ("top", "wrist")
            },
            proprio=rng.normal(size=(steps, 24)).astype(np.float32),
            actions=rng.uniform(-1, 1, (steps, 4)).astype(np.float32),
            instruction="reach the target",
            success=True,
        )
        for _ in range(count)
    ]


def sft_config(run_dir: Path, maps: dict[str, object]) -> object:
    return validate_sft_config(
        {
            "policy": {
                "name": "pi0",
                "init_from": str(FIXTURE / "policy"),
                "tokenizer_dir": str(FIXTURE / "tokenizer"),
                **maps,
            },
            "eval": {"num_episodes": 0},
            "logger": {"progress_bar": False, "tensorboard": False, "wandb_mode": "disabled"},
            "steps": 2,
            "batch_size": 2,
            "checkpoint_interval": 2,
            "run_dir": str(run_dir),
        }
    )


def test_sft_without_the_action_map_names_both_widths(tmp_path: Path) -> None:
    maps = {key: value for key, value in MAPS.items() if key != "action_map"}
    with pytest.raises(ConfigError, match="'policy.action_map': .*7 dimensions, the demonstrations' 4"):
        SFTTrainer(sft_config(tmp_path, maps), demonstrations())


def test_sft_through_the_maps_trains_and_saves_them(tmp_path: Path) -> None:
    result = SFTTrainer(sft_config(tmp_path, MAPS), demonstrations()).train()
    assert all(np.isfinite(metrics["train/loss"]) for metrics in result.history)
    saved = load_chunk_policy("pi0", result.last_checkpoint / POLICY_DIRNAME)
    assert saved.cfg.lerobot.maps.action_map.index == [0, 1, 2, 6]
    assert saved.cfg.lerobot.maps.camera_map == {"front": "top"}
    assert saved.action_dim == 4
