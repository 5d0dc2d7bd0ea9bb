"""Composition of every YAML in configs/ and key-naming validation errors raised before any env exists."""

from __future__ import annotations

from pathlib import Path

import pytest
import vla_rl.configs

from vla_rl.cli import EXIT_CONFIG_ERROR, main
from vla_rl.config import ConfigError, TrainConfig, compose_train_config
from vla_rl.config.load import compose_config_module
from vla_rl.envs import EnvConfig
from vla_rl.policies.config import GENERIC_HIDDEN_SIZES, PolicyConfig

CONFIG_DIR = Path(vla_rl.configs.__file__).parent
BUILT_ENVS: list[EnvConfig] = []


def counting_backend(cfg: EnvConfig):  # noqa: ANN202 - never returns in these tests
    BUILT_ENVS.append(cfg)
    raise AssertionError("an environment was built although the config is invalid")


def _group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def test_groups_have_the_expected_options() -> None:
    assert _group_options("env") == [
        "gym_hil_pick_cube",
        "libero",
        "lift",
        "metaworld",
        "pick_place",
        "push",
        "reach",
        "reach_pixels",
    ]
    assert _group_options("policy") == ["cnn", "mlp"]
    assert _group_options("algorithm") == ["ppo", "ppo_pixels", "rlpd", "sac"]
    assert _group_options("logger") == ["default"]


def test_pixel_ppo_inherits_ppo_with_a_linearly_decaying_learning_rate() -> None:
    pixels = compose_train_config(["algorithm=ppo_pixels"]).algorithm
    plain = compose_train_config([]).algorithm
    assert (pixels.lr_schedule, pixels.learning_rate) == ("linear", 3e-4)
    same = ("num_steps", "num_epochs", "clip_ratio", "gamma", "desired_kl")
    assert [getattr(pixels, k) for k in same] == [getattr(plain, k) for k in same]


@pytest.mark.parametrize("env", _group_options("env"))
@pytest.mark.parametrize("policy", _group_options("policy"))
def test_every_group_option_composes_and_validates(env: str, policy: str) -> None:
    cfg = compose_train_config([f"env={env}", f"policy={policy}"])
    assert isinstance(cfg, TrainConfig)
    tasks = {
        "reach_pixels": "reach",
        "metaworld": "MT10",
        "libero": "libero_spatial/0",
        "gym_hil_pick_cube": "vla_rl.sims.gym_hil.env:GymHilPickCube-v0",
    }
    assert cfg.env.task == tasks.get(env, env)
    assert cfg.policy.name == policy


def test_default_job_is_state_ppo_on_reach() -> None:
    cfg = compose_train_config([])
    assert (cfg.env.task, cfg.env.cameras, cfg.policy.name, cfg.algorithm.name) == ("reach", [], "mlp", "ppo")
    assert cfg.policy.hidden_sizes == [64, 64]  # reach's own default (ReachTask)
    assert cfg.algorithm.lr_schedule == "adaptive"
    assert 0 < cfg.max_minutes <= 6
    assert cfg.run_dir.startswith("runs/reach_") and "${" not in cfg.run_dir


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["env=push"], [256, 256, 128]),
        (["env=metaworld"], [256, 256, 128]),  # a task of another backend: the generic widths
        (["policy.hidden_sizes=[8,8]"], [8, 8]),  # an explicit setting wins over the task's
        (["env=reach_pixels", "policy=cnn"], [256, 128]),  # cnn.yaml sets its own
    ],
)
def test_null_hidden_sizes_take_the_task_default(overrides: list[str], expected: list[int]) -> None:
    assert compose_train_config(overrides).policy.hidden_sizes == expected


def test_policy_config_built_in_code_falls_back_to_the_generic_widths() -> None:
    assert PolicyConfig().head_sizes() == GENERIC_HIDDEN_SIZES


def test_pixel_env_renders_the_camera_the_cnn_reads() -> None:
    cfg = compose_train_config(["env=reach_pixels", "policy=cnn"])
    assert [f"rgb_{c}" for c in cfg.env.cameras] == [
        k for k in cfg.policy.actor_obs_keys if k.startswith("rgb_")
    ]


def test_eval_yaml_composes() -> None:
    job = compose_config_module("eval", ["checkpoint=some/run"])
    assert job.checkpoint == "some/run" and job.output_dir is None


def test_overrides_apply_with_types() -> None:
    cfg = compose_train_config(["env=push", "algorithm.learning_rate=3e-4", "env.num_envs=128"])
    assert cfg.env.task == "push" and cfg.env.num_envs == 128
    assert cfg.algorithm.learning_rate == pytest.approx(3e-4)
    assert isinstance(cfg.algorithm.learning_rate, float)


@pytest.mark.parametrize(
    ("override", "fragments"),
    [
        ("algorithm.learnin_rate=1e-3", ["unknown config key", "algorithm.learnin_rate"]),
        ("+algorithm.learnin_rate=1e-3", ["unknown config key", "algorithm.learnin_rate"]),
        ("+typo_top=1", ["unknown config key", "typo_top"]),
        ("algorithm.gamma=abc", ["algorithm.gamma", "abc"]),
        ("env.num_envs=many", ["env.num_envs", "many"]),
        ("algorithm.gamma=1.5", ["algorithm.gamma", "(0, 1]"]),
        ("algorithm.gamma=0", ["algorithm.gamma", "(0, 1]"]),
        ("env.num_envs=0", ["env.num_envs", "positive"]),
        ("algorithm.num_minibatches=3", ["algorithm.num_minibatches", "divide"]),
        ("logger.wandb_mode=sometimes", ["logger.wandb_mode", "offline"]),
        ("success_target=1.5", ["success_target"]),
        ("algorithm.lr_schedule=cosine", ["algorithm.lr_schedule", "'linear'"]),
        ("algorithm.lr_schedule=linear", ["algorithm.lr_decay_iterations", "positive"]),
    ],
)
def test_bad_config_names_the_key(override: str, fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as raised:
        compose_train_config([override])
    for fragment in fragments:
        assert fragment in str(raised.value)


def test_num_minibatches_must_divide_the_batch() -> None:
    # 32 steps * 6 worlds = 192 transitions: 3 divides it, 5 does not.
    assert (
        compose_train_config(["env.num_envs=6", "algorithm.num_minibatches=3"]).algorithm.num_minibatches == 3
    )
    with pytest.raises(ConfigError, match="algorithm.num_minibatches"):
        compose_train_config(["env.num_envs=6", "algorithm.num_minibatches=5"])


@pytest.mark.parametrize(
    "override", ["algorithm.learnin_rate=1e-3", "algorithm.gamma=abc", "algorithm.gamma=2.0"]
)
def test_cli_rejects_bad_config_before_building_an_env(
    override: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = len(BUILT_ENVS)
    code = main(["train", f"env.backend={__name__}:counting_backend", f"run_dir={tmp_path}", override])
    assert code == EXIT_CONFIG_ERROR
    assert override.split("=")[0] in capsys.readouterr().err
    assert len(BUILT_ENVS) == before
    assert list(tmp_path.iterdir()) == []


def test_reward_normalisation_is_on_for_gymnasium_envs_and_off_for_the_builtin_tasks() -> None:
    assert compose_train_config([]).algorithm.normalize_rewards is False
    gym_env = ["env.backend=gymnasium", "env.task=Pendulum-v1"]
    assert compose_train_config(gym_env).algorithm.normalize_rewards is True
    assert (
        compose_train_config([*gym_env, "algorithm.normalize_rewards=false"]).algorithm.normalize_rewards
        is False
    )
    assert compose_train_config(["algorithm.normalize_rewards=true"]).algorithm.normalize_rewards is True
    learned = ["reward=learned", "reward.path=/none", "env.cameras=[front,wrist]"]
    assert compose_train_config(learned).algorithm.normalize_rewards is False
    with pytest.raises(ConfigError, match=r"'algorithm.normalize_rewards': cannot be on with a reward model"):
        compose_train_config([*learned, "algorithm.normalize_rewards=true"])
