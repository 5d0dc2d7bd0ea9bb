"""The SFT config composes from configs/sft.yaml; unknown keys, wrong types and bad values name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from vla_rl.config.load import ConfigError
from vla_rl.training.sft.config import SFTConfig
from vla_rl.training.sft.config_load import compose_sft_config, load_sft_config_file, validate_sft_config


def test_default_config_composes_with_the_env_logger_and_policy_groups() -> None:
    cfg = compose_sft_config(["data.path=/data/reach", "data.max_episodes=10", "env.num_envs=4"])
    assert isinstance(cfg, SFTConfig)
    assert cfg.data.path == "/data/reach" and cfg.data.max_episodes == 10
    assert cfg.env.task == "reach" and cfg.env.num_envs == 4
    assert cfg.policy.name == "flow_mlp" and cfg.policy.kwargs["chunk_len"] == 4
    assert cfg.policy.kwargs["vector_obs_dims"] == {"proprio": 24, "privileged": 6}
    assert isinstance(cfg.policy.kwargs["vector_obs_dims"], dict)
    assert cfg.logger.wandb_mode == "offline"


def test_policy_kwargs_accept_new_keys_with_plus() -> None:
    cfg = compose_sft_config(["+policy.kwargs.num_denoising_steps=5"])
    assert cfg.policy.kwargs["num_denoising_steps"] == 5 and cfg.policy.name == "flow_mlp"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("optim.lr=1e-3", "optim.lr"),
        ("stepz=3", "stepz"),
        ("steps=many", "steps"),
        ("batch_size=0", "batch_size"),
        ("optim.min_lr_ratio=2", "optim.min_lr_ratio"),
        ("optim.betas=[0.9]", "optim.betas"),
        ("data.action_quantiles=[0.9,0.1]", "data.action_quantiles"),
        ("eval.num_episodes=ten", "eval.num_episodes"),
        ("logger.wandb_mode=sometimes", "logger.wandb_mode"),
    ],
)
def test_errors_name_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'"):
        compose_sft_config([override])


def test_validate_rejects_unknown_nested_key_in_a_dict() -> None:
    with pytest.raises(ConfigError, match="'optim.momentum'"):
        validate_sft_config({"optim": {"momentum": 0.9}})
    with pytest.raises(ConfigError, match="'env.num_envs'"):
        validate_sft_config({"env": {"num_envs": 0}})


def test_saved_config_file_reloads_with_overrides(tmp_path: Path) -> None:
    cfg = compose_sft_config(["data.path=/d", "steps=7"])
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    assert load_sft_config_file(path) == cfg
    again = load_sft_config_file(path, ["steps=9"])
    assert again.steps == 9 and again.data.path == "/d"
    with pytest.raises(ConfigError, match="'optim.lr'"):
        load_sft_config_file(path, ["optim.lr=1"])


@pytest.mark.parametrize("family", ["flow_mlp", "gaussian", "token_vla", "chunk_vla", "pi0"])
def test_every_policy_option_composes(family: str) -> None:
    cfg = compose_sft_config([f"sft/policy={family}", "env=reach_pixels"])
    assert cfg.policy.name == family
    assert cfg.policy.kwargs["chunk_len"] == 4 and cfg.policy.kwargs["action_dim"] == 4
    assert "front" in cfg.env.cameras  # the camera the image families read is rendered
