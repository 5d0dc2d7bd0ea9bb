"""The chunk-RL config is checked before any work: bad values, the committed recipes, the clock
schedules that became step schedules, saved configs of earlier runs, typed exploration settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_chunk_rl import overrides

from vla_rl.cli import main
from vla_rl.config.load import ConfigError
from vla_rl.training.chunk_rl.config_load import compose_rl_config


def test_bad_rl_configs_fail_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="policy.init_from"):
        compose_rl_config(["recipe=token_vla_ppo"])
    with pytest.raises(ConfigError, match="group_size"):
        compose_rl_config(["recipe=token_vla_grpo", "policy.init_from=x", "env.num_envs=6"])
    with pytest.raises(ConfigError, match="'algorithm.clip_low'"):
        compose_rl_config(["recipe=token_vla_ppo", "policy.init_from=x", "algorithm.clip_low=1.5"])
    with pytest.raises(ConfigError, match="'algorithm.reward': must be one of"):
        compose_rl_config(["recipe=token_vla_ppo", "policy.init_from=x", "algorithm.reward=shaped"])
    assert main(["train", "recipe=token_vla_ppo", f"policy.init_from={tmp_path / 'missing'}"]) == 2


def test_rl_yaml_lists_the_algorithm_defaults_of_the_schema():
    from dataclasses import asdict

    from omegaconf import OmegaConf

    from vla_rl.algorithms.chunk_config import ChunkRLConfig

    listed = OmegaConf.to_container(
        OmegaConf.load(Path(__file__).parents[3] / "configs" / "rl.yaml").algorithm
    )
    assert listed == asdict(ChunkRLConfig())


@pytest.mark.parametrize(
    "recipe",
    [
        "token_vla_ppo",
        "token_vla_grpo",
        "pi0_flow_sde",
        "pi0_flow_sde_ppo",
        "pi0_flow_noise",
        "pi0_flow_noise_ppo",
    ],
)
def test_every_recipe_composes_and_validates(recipe):
    cfg = compose_rl_config([f"recipe={recipe}", "policy.init_from=x"])
    if cfg.algorithm.name == "vla_grpo":
        assert cfg.env.num_envs % cfg.algorithm.group_size == 0
    if recipe.startswith("pi0"):
        assert cfg.policy.exploration.exploration == recipe.removeprefix("pi0_").removesuffix("_ppo")
    else:  # both token recipes take the policy from recipe/parts/token_vla_policy.yaml
        assert cfg.policy.name == "token_vla"
        assert "backbone.model.language_model.layers.1." in cfg.policy.freeze
    # A budget in updates and a wall-clock cap beside it; a decay of the actor's rate ends at the
    # budget's last actor step (the pi0 PPO recipes: at twice the budget, so it ends at half the rate).
    assert cfg.iterations > 0 and cfg.max_minutes > 0
    acfg = cfg.algorithm
    if acfg.actor_lr_decay_steps:
        steps_per_update = acfg.num_epochs * acfg.num_minibatches
        warmup = acfg.critic_warmup_iterations if acfg.name == "vla_ppo" else 0
        ends_at = 2 * cfg.iterations if recipe.startswith("pi0") else cfg.iterations
        assert acfg.actor_lr_decay_steps == (ends_at - warmup) * steps_per_update


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("algorithm.actor_lr_decay_minutes=60", "algorithm.actor_lr_decay_steps"),
        ("+policy.exploration_anneal_minutes=60", "policy.exploration_anneal_updates"),
    ],
)
def test_a_schedule_on_the_clock_is_refused_naming_its_replacement(tmp_path, capsys, old, new):
    args = [*overrides(tmp_path / "run", tmp_path / "missing"), old]
    with pytest.raises(ConfigError, match=f"{old.split('=')[0].lstrip('+')}' was removed.*'{new}'"):
        compose_rl_config(args)
    assert main(["train", *args]) == 2  # before any model or env loads
    assert new in capsys.readouterr().err


def saved_config_of_an_earlier_run(tmp_path: Path, decay_minutes: float, anneal_minutes: float) -> Path:
    """A run's ``config.yaml`` as runs before the step schedules saved it (with both clock keys)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(
        OmegaConf.structured(compose_rl_config(overrides(tmp_path / "old", tmp_path / "sft")))
    )
    del cfg["policy"]["exploration_anneal_updates"]
    cfg["policy"]["exploration_anneal_minutes"] = anneal_minutes
    cfg["algorithm"]["actor_lr_decay_minutes"] = decay_minutes
    path = tmp_path / "old" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(cfg), path)
    return path


def test_saved_configs_of_earlier_runs_load_or_name_the_migration(tmp_path):
    from vla_rl.training.chunk_rl.config_load import load_rl_config_file

    # Off (0), as every run without a clock schedule saved them: they load as they are.
    cfg = load_rl_config_file(saved_config_of_an_earlier_run(tmp_path, 0.0, 0.0))
    assert cfg.algorithm.actor_lr_decay_steps == 0 and cfg.policy.exploration_anneal_updates == 0
    assert cfg.policy.exploration.exploration == "flow_sde" and cfg.policy.exploration.noise_level == 0.3
    # On: a resume must choose the steps; the error says which key and how to override it.
    path = saved_config_of_an_earlier_run(tmp_path, 60.0, 0.0)
    with pytest.raises(
        ConfigError, match="~algorithm.actor_lr_decay_minutes.*algorithm.actor_lr_decay_steps="
    ):
        load_rl_config_file(path)
    resumed = load_rl_config_file(
        path, ["~algorithm.actor_lr_decay_minutes", "algorithm.actor_lr_decay_steps=64"]
    )
    assert resumed.algorithm.actor_lr_decay_steps == 64
    # An evaluation does not use the learning rate: the decay is dropped.
    assert load_rl_config_file(path, for_evaluation=True).algorithm.actor_lr_decay_steps == 0
    with pytest.raises(ConfigError, match="policy.exploration_anneal_updates"):
        load_rl_config_file(saved_config_of_an_earlier_run(tmp_path, 0.0, 30.0), for_evaluation=True)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("++policy.exploration.noise_levle=0.3", "unknown config key 'policy.exploration.noise_levle'"),
        ("policy.exploration.noise_level=high", "config key 'policy.exploration.noise_level'"),
        ("policy.exploration.exploration=flow_sdee", "'policy.exploration.exploration': must be one of"),
        ("policy.exploration.noise_level=-0.1", "'policy.exploration.noise_level': must not be negative"),
        ("++policy.exploration.noise_std_bounds=[0.2,0.1]", "'policy.exploration.noise_std_bounds'"),
        ("++policy.exploration.noise_mean=ode", "'policy.exploration.noise_mean': must be one of"),
        ("++policy.exploration.noise_std_profile=steep", "'policy.exploration.noise_std_profile'"),
        ("++policy.exploration.chain_log_prob=max", "'policy.exploration.chain_log_prob'"),
        ("++policy.exploration.noisy_chunk_steps=-1", "'policy.exploration.noisy_chunk_steps'"),
        ("++policy.exploration.reuse_frozen_prefix=false", "reuse_frozen_prefix': is a setting of pi0 and"),
        ("policy.name=token_vla", "'policy.exploration': token_vla has no exploration settings"),
    ],
)
def test_exploration_settings_are_checked_before_anything_loads(tmp_path, capsys, override, message):
    # policy.init_from names no folder: an error raised after validation would be a different one.
    args = [*overrides(tmp_path / "run", tmp_path / "missing"), override]
    with pytest.raises(ConfigError, match=message):
        compose_rl_config(args)
    assert main(["train", *args]) == 2
    assert "error: " in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("distributed.runtime=dask", "distributed.runtime"),
        ("distributed.env_workers=3", "distributed.env_workers"),  # 4 worlds do not split into 3
        ("distributed.trainer_ranks=-1", "distributed.trainer_ranks"),
        ("distributed.trainer_ranks=2", "distributed.trainer_ranks"),  # several ranks need Ray
        ("distributed.env_worker_cpus=-1", "distributed.env_worker_cpus"),
        ("distributed.placement.mode=spread", "distributed.placement.mode"),
        ("distributed.placement.mode=collocated", "distributed.placement.mode"),  # needs Ray
        ("distributed.placement.num_gpus=0", "distributed.placement.num_gpus"),
        ("distributed.trainer_strategy=zero3", "distributed.trainer_strategy"),
    ],
)
def test_a_bad_distributed_setting_fails_naming_its_key_before_any_work(tmp_path, override, key):
    args = [*overrides(tmp_path / "run", tmp_path / "not_loaded"), override]
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        compose_rl_config(args)
    assert main(["train", *args]) == 2
    assert not (tmp_path / "run").exists()  # nothing was built or written
