"""``reward.options`` are typed per reward model and checked when a config is validated, before any
env is built or model loaded; every error names the full key."""

from __future__ import annotations

from pathlib import Path

import pytest

from vla_rl.cli import EXIT_CONFIG_ERROR, main
from vla_rl.config import ConfigError, compose_train_config
from vla_rl.config.load import Schema
from vla_rl.envs import EnvConfig
from vla_rl.registry import resolve
from vla_rl.rewards.config import REWARD_MODEL_OPTIONS
from vla_rl.rewards.contrastive import ContrastiveOptions
from vla_rl.rewards.learned import LearnedOptions
from vla_rl.rewards.vlm_judge import VLMJudgeOptions
from vla_rl.training.chunk_rl.config_load import compose_rl_config

BUILT_ENVS: list[EnvConfig] = []
CONTRASTIVE = ["reward=contrastive", "reward.path=/no/model/here", "env.cameras=[front]"]


def counting_backend(cfg: EnvConfig):  # noqa: ANN202 - never returns in these tests
    BUILT_ENVS.append(cfg)
    raise AssertionError("an environment was built although the config is invalid")


def test_every_builtin_model_has_a_typed_options_schema() -> None:
    schemas = {
        name: resolve(REWARD_MODEL_OPTIONS, name, "reward model options") for name in REWARD_MODEL_OPTIONS
    }
    assert all(isinstance(schema, Schema) for schema in schemas.values())
    assert schemas["learned"].type is LearnedOptions
    assert schemas["contrastive"].type is ContrastiveOptions
    assert schemas["vlm_judge"].type is VLMJudgeOptions


def test_valid_options_pass_without_loading_the_model() -> None:
    cfg = compose_train_config(
        [*CONTRASTIVE, "reward.options.alpha=0.5", "reward.options.baseline_prompt=a robot"]
    )
    assert cfg.reward.options["alpha"] == 0.5  # the path does not exist: nothing was loaded


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        (["+reward.options.alpah=0.5"], ["unknown config key 'reward.options.alpah'"]),
        (["reward.options.alpha=high"], ["'reward.options.alpha'", "could not be converted"]),
        (
            ["reward.options.alpha=1.5", "reward.options.baseline_prompt=x"],
            ["'reward.options.alpha'", "[0, 1]"],
        ),
        (["reward.options.alpha=0.5"], ["'reward.options.baseline_prompt'", "alpha > 0"]),
        (["reward.options.normalization=batch"], ["'reward.options.normalization'"]),
        (["+reward.options.device=gpu0"], ["'reward.options.device'", "torch device"]),
    ],
)
def test_bad_contrastive_options_name_the_full_key(overrides: list[str], fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as error:
        compose_train_config([*CONTRASTIVE, *overrides])
    for fragment in fragments:
        assert fragment in str(error.value)


def test_learned_and_vlm_judge_options_are_checked_too() -> None:
    learned = ["reward=learned", "reward.path=/none", "env.cameras=[front,wrist]"]
    with pytest.raises(ConfigError, match=r"'reward.options.score': must be one of"):
        compose_train_config([*learned, "reward.options.score=best"])
    judge = ["reward=vlm_judge", "reward.path=/none", "env.cameras=[front]"]
    with pytest.raises(ConfigError, match=r"unknown config key 'reward.options.temperature'"):
        compose_train_config([*judge, "+reward.options.temperature=1.0"])
    with pytest.raises(ConfigError, match=r"'reward.options.dtype'"):
        compose_train_config([*judge, "+reward.options.dtype=float8"])


def test_options_without_a_model_and_an_unknown_model_are_errors() -> None:
    with pytest.raises(ConfigError, match=r"'reward.options': .*set reward.model"):
        compose_train_config(["+reward.options.alpha=0.5"])
    with pytest.raises(ConfigError, match=r"'reward.model': unknown reward model 'contrastiv'"):
        compose_train_config(["reward.model=contrastiv", "reward.path=x", "env.cameras=[front]"])


def test_rl_configs_check_their_reward_options() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'reward.options.alpah'"):
        compose_rl_config(
            [
                "policy.init_from=/some/sft/run",
                "algorithm.reward=dense",
                "reward=contrastive",
                "reward.path=x",
                "+reward.options.alpah=0.5",
            ]
        )


def test_cli_exits_2_before_building_an_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = len(BUILT_ENVS)
    code = main(
        ["train", f"env.backend={__name__}:counting_backend", f"run_dir={tmp_path}", *CONTRASTIVE]
        + ["+reward.options.goal_promt=x"]
    )
    assert code == EXIT_CONFIG_ERROR
    assert "reward.options.goal_promt" in capsys.readouterr().err
    assert len(BUILT_ENVS) == before
