"""``vla-rl train recipe=token_vla_ppo policy.name=openvla policy.init_from=<OpenVLA folder>`` on MuJoCo
``reach`` with the stand-in folder (standin_folder.py): PPO samples and scores the action tokens
through the folder's model, an update changes its weights, and the checkpoint reloads with the key
and the maps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vla_rl.cli import main
from vla_rl.config.load import ConfigError
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer


def overrides(folder: Path, run_dir: Path) -> list[str]:
    return [
        "recipe=token_vla_ppo",
        "policy.name=openvla",
        f"policy.init_from={folder}",
        "policy.trust_remote_code=true",
        "policy.unnorm_key=bridge_orig",
        "policy.freeze=[]",
        "policy.action_map.index=[0,1,2,6]",
        "policy.camera_map={primary: top}",
        "algorithm.num_decisions=2",
        "algorithm.num_minibatches=1",
        "algorithm.num_epochs=1",
        "algorithm.critic_warmup_iterations=0",
        "algorithm.execute_steps=1",
        "env=reach",
        "env.cameras=[top]",
        "env.image_size=24",
        "env.num_envs=2",
        "env.num_threads=1",
        "env.max_episode_steps=4",
        "eval.num_episodes=0",
        "checkpoint_interval=1",
        "torch_num_threads=1",
        "logger.progress_bar=false",
        "logger.tensorboard=false",
        "logger.wandb_mode=disabled",
        f"run_dir={run_dir}",
    ]


def test_without_the_action_map_the_run_stops_first(standin_dir: Path, tmp_path: Path) -> None:
    settings = [o for o in overrides(standin_dir, tmp_path / "run") if not o.startswith("policy.action_map")]
    with pytest.raises(ConfigError, match=r"'policy.action_map': the checkpoint's actions have 7 dimensions"):
        ChunkRLTrainer(compose_rl_config([*settings, "iterations=1"]))


@pytest.mark.parametrize("level", ["action", "token"])
def test_ppo_updates_the_folders_model(standin_dir: Path, tmp_path: Path, capsys, level: str) -> None:
    run_dir = tmp_path / "run"
    settings = [*overrides(standin_dir, run_dir), f"algorithm.log_prob_level={level}", "iterations=1"]
    assert main(["train", *settings]) == 0
    assert "trained 1 iterations" in capsys.readouterr().out
    saved = load_chunk_policy(
        "openvla", run_dir / "checkpoints" / "iter_000001" / "policy", trust_remote_code=True
    )
    assert saved.unnorm_key == "bridge_orig" and saved.action_dim == 4  # key and maps saved
    assert saved.maps.camera_map == {"primary": "top"}
    start = load_chunk_policy("openvla", standin_dir, unnorm_key="bridge_orig", trust_remote_code=True)
    head = saved.model.language_model.get_output_embeddings().weight
    assert not torch.equal(head, start.model.language_model.get_output_embeddings().weight)
