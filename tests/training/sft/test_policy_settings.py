"""``policy.kwargs`` of an SFT config are typed per chunk-policy family: unknown keys, wrong types and
bad values are ``ConfigError``s naming ``policy.kwargs.<key>`` when the config is validated."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from vla_rl.cli import EXIT_CONFIG_ERROR, main
from vla_rl.config.load import ConfigError
from vla_rl.policies.base import GaussianChunkBuildSettings, GaussianChunkConfig
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.flow.flow_mlp import FlowMLPBuildSettings, FlowMLPConfig
from vla_rl.policies.flow.pi0_config import Pi0BuildSettings, Pi0PolicyConfig, tiny_pi0_config
from vla_rl.policies.flow.pi0_io import TINY_CONFIG_ARGS
from vla_rl.policies.flow.smolvla_config import SmolVLABuildSettings, SmolVLAPolicyConfig
from vla_rl.policies.registry import build_chunk_policy
from vla_rl.policies.vla.config import (
    TINY_BACKBONE_ARGS,
    TokenVLABuildSettings,
    TokenVLAConfig,
    tiny_paligemma_config,
)
from vla_rl.training.checkpoint import write_config
from vla_rl.training.sft.config_load import compose_sft_config, load_sft_config_file
from vla_rl.training.sft.policy_settings import FAMILY_SETTINGS, family_settings_schema

TOKENIZER_ARGS = {"vocab_size", "image_token_id", "pad_token_id", "bos_token_id", "eos_token_id"}
"""Arguments of the tiny configs that come from the tokenizer, never from the user."""


def _names(cls: type) -> set[str]:
    return {field.name for field in dataclasses.fields(cls)}


def test_each_family_has_its_settings_dataclass() -> None:
    assert {name: family_settings_schema(name).type for name in FAMILY_SETTINGS} == {
        "token_vla": TokenVLABuildSettings,
        "chunk_vla": TokenVLABuildSettings,
        "pi0": Pi0BuildSettings,
        "smolvla": SmolVLABuildSettings,
        "flow_mlp": FlowMLPBuildSettings,
        "gaussian": GaussianChunkBuildSettings,
    }


def test_settings_are_the_family_config_plus_exactly_the_keywords_build_takes_besides() -> None:
    # TokenVLABase.build(pretrained_vlm_dir, backbone, instructions, **TokenVLAConfig fields)
    assert _names(TokenVLABuildSettings) - _names(TokenVLAConfig) == {
        "pretrained_vlm_dir",
        "backbone",
        "instructions",
    }
    tiny_vlm_args = set(inspect.signature(tiny_paligemma_config).parameters) - TOKENIZER_ARGS
    assert set(TINY_BACKBONE_ARGS) == tiny_vlm_args
    # pi0_io.build_pi0 pops these four, and passes the rest to tiny_pi0_config (TINY_CONFIG_ARGS).
    extras = {"pretrained_dir", "chunk_len", "proprio_dim", "instructions"} | TINY_CONFIG_ARGS
    assert _names(Pi0BuildSettings) - _names(Pi0PolicyConfig) == extras
    tiny_pi0_args = set(inspect.signature(tiny_pi0_config).parameters) - TOKENIZER_ARGS - {"chunk_size"}
    assert tiny_pi0_args == TINY_CONFIG_ARGS
    # SmolVLAPolicy.build pops these three and passes the rest to SmolVLAPolicyConfig.
    assert _names(SmolVLABuildSettings) - _names(SmolVLAPolicyConfig) == {
        "pretrained_dir",
        "vlm_dir",
        "chunk_len",
    }
    assert _names(FlowMLPBuildSettings) - _names(FlowMLPConfig) == {"proprio_dim"}
    assert _names(GaussianChunkBuildSettings) - _names(GaussianChunkConfig) == {"proprio_dim"}


@pytest.mark.parametrize("family", ["flow_mlp", "gaussian", "token_vla", "chunk_vla", "pi0"])
def test_every_committed_policy_option_validates(family: str) -> None:
    cfg = compose_sft_config([f"sft/policy={family}", "env=reach_pixels"])
    settings = family_settings_schema(family).validate(cfg.policy.kwargs, "policy.kwargs")
    assert settings.chunk_len == 4 and settings.action_dim == 4


def test_validated_kwargs_build_and_build_rejects_what_validation_rejects() -> None:
    kwargs = compose_sft_config([]).policy.kwargs
    policy = build_chunk_policy("flow_mlp", **kwargs)
    assert policy.cfg.vector_obs_dims == {"proprio": 24, "privileged": 6}
    with pytest.raises(ConfigError, match="'policy.kwargs.hiden_sizes'"):
        compose_sft_config(["+policy.kwargs.hiden_sizes=[8]"])
    with pytest.raises(ValueError, match="hiden_sizes"):
        build_chunk_policy("flow_mlp", **kwargs, hiden_sizes=[8])


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["+policy.kwargs.hiden_sizes=[8]"], "unknown config key 'policy.kwargs.hiden_sizes'"),
        (["policy.kwargs.chunk_len=four"], "'policy.kwargs.chunk_len'"),
        (["policy.kwargs.chunk_len=0"], "'policy.kwargs.chunk_len': must be positive"),
        (["policy.kwargs.hidden_sizes=[64,0]"], "'policy.kwargs.hidden_sizes': must be positive"),
        (["+policy.kwargs.time_embed_dim=7"], "'policy.kwargs.time_embed_dim': must be even"),
        (["+policy.kwargs.activation=swish"], "'policy.kwargs.activation'"),
        (["+policy.kwargs.exploration=flow_sdee"], "unknown exploration mode 'flow_sdee'"),
        (
            ["sft/policy=gaussian", "+policy.kwargs.policy={hiden_sizes:[8]}"],
            "'policy.kwargs.policy.hiden_sizes'",
        ),
        (["sft/policy=gaussian", "+policy.kwargs.policy={name:rnn}"], "'policy.kwargs.policy.name'"),
        (["sft/policy=gaussian", "+policy.kwargs.sft_loss_type=l1"], "'policy.kwargs.sft_loss_type'"),
        (["sft/policy=pi0", "+policy.kwargs.hiden_size=8"], "unknown config key 'policy.kwargs.hiden_size'"),
        (["sft/policy=pi0", "+policy.kwargs.num_layers=0"], "'policy.kwargs.num_layers': must be positive"),
        (["sft/policy=pi0", "+policy.kwargs.aux_target_key=privileged"], "'policy.kwargs.aux_target_key'"),
        (["sft/policy=token_vla", "+policy.kwargs.backbone={num_layrs:4}"], "'policy.kwargs.backbone'"),
        (["sft/policy=token_vla", "policy.kwargs.use_proprio=maybe"], "'policy.kwargs.use_proprio'"),
        (["sft/policy=token_vla", "+policy.kwargs.lora={rank:0}"], "'policy.kwargs.lora'"),
        (["sft/policy=chunk_vla", "+policy.kwargs.lora={rnk:4}"], "'policy.kwargs.lora.rnk'"),
        (["policy.name=tokn_vla"], "'policy.name': unknown policy 'tokn_vla'"),
    ],
)
def test_bad_kwargs_name_the_full_key(overrides: list[str], fragment: str) -> None:
    with pytest.raises(ConfigError) as error:
        compose_sft_config(overrides)
    assert fragment in str(error.value)


def test_the_sft_benchmark_settings_validate() -> None:
    token = [
        "sft/policy=token_vla",
        "policy.kwargs.proprio_dim=32",
        "+policy.kwargs.state_keys=[proprio,objects]",
        "+policy.kwargs.proprio_fields=[arm_qpos,gripper_opening_m,tcp_pos,tcp_rot6]",
        "+policy.kwargs.state_token_sizes=[17,3,3,3,2,2,2]",
        "+policy.kwargs.aux_target_key=privileged",
        "+policy.kwargs.aux_target_dim=26",
        "+policy.kwargs.aux_layer=2",
        "+policy.kwargs.backbone={num_layers:4}",
    ]
    assert compose_sft_config(token).policy.kwargs["backbone"] == {"num_layers": 4}
    pi0 = ["sft/policy=pi0", "policy.kwargs.proprio_dim=32", "+policy.kwargs.num_layers=4"]
    assert compose_sft_config(pi0).policy.kwargs["num_layers"] == 4


def test_a_saved_config_reloads(tmp_path: Path) -> None:
    cfg = compose_sft_config(["sft/policy=gaussian", "+policy.kwargs.policy={hidden_sizes:[8]}"])
    write_config(tmp_path, cfg)
    assert load_sft_config_file(tmp_path / "config.yaml") == cfg
    settings = family_settings_schema("gaussian").validate(cfg.policy.kwargs, "policy.kwargs")
    assert isinstance(settings.policy, PolicyConfig) and settings.policy.hidden_sizes == [8]


def test_cli_exits_2_before_reading_demonstrations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "sft",
            f"data.path={tmp_path / 'no_dataset'}",
            f"run_dir={tmp_path / 'run'}",
            "+policy.kwargs.hiden_sizes=[8]",
        ]
    )
    assert code == EXIT_CONFIG_ERROR
    assert "policy.kwargs.hiden_sizes" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
