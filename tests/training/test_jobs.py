"""Which job a command runs and which config it gets: composed, resumed from a path, or ``resume=auto``."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vla_rl.config import ConfigError, TrainConfig
from vla_rl.training.checkpoint import CONFIG_FILENAME, save_checkpoint
from vla_rl.training.chunk_rl.config import VLARLConfig
from vla_rl.training.jobs import job_config, job_of_saved_config, override_value, train_job
from vla_rl.training.sft.config import SFTConfig


def _run(run_dir: Path, config: object, drop_job: bool = False) -> Path:
    """A run folder with one checkpoint of ``config``; ``drop_job`` writes it as the release before
    the ``job`` key did."""
    checkpoint = save_checkpoint(run_dir, 3, None, {"iteration": 3}, config)
    if drop_job:
        saved = yaml.safe_load((checkpoint / CONFIG_FILENAME).read_text())
        del saved["job"]
        (checkpoint / CONFIG_FILENAME).write_text(yaml.safe_dump(saved))
    return checkpoint


def test_override_value_reads_the_last_word_of_a_key() -> None:
    assert override_value(["env=push", "+resume=runs/a"], "resume") == "runs/a"
    assert override_value(["resume=null"], "resume") is None
    assert override_value(["resume="], "resume") is None
    assert override_value(["resume_from=x"], "resume") is None


@pytest.mark.parametrize(
    ("config", "job"), [(TrainConfig(), "ppo"), (VLARLConfig(), "rl"), (SFTConfig(), "sft")]
)
def test_a_saved_config_names_its_job_with_or_without_the_job_key(
    tmp_path: Path, config: object, job: str
) -> None:
    recorded = _run(tmp_path / "new", config)
    assert yaml.safe_load((recorded / CONFIG_FILENAME).read_text())["job"] == job
    assert train_job([], str(tmp_path / "new")) == job
    older = _run(tmp_path / "old", config, drop_job=True)
    assert job_of_saved_config(yaml.safe_load((older / CONFIG_FILENAME).read_text())) == job


def test_a_recipe_picks_rl_and_nothing_picks_ppo() -> None:
    assert train_job(["recipe=token_vla_ppo", "policy.init_from=x"], None) == "rl"
    assert train_job(["env=push"], None) == "ppo"
    assert train_job(["env=push"], "auto") == "ppo"


def test_a_recipe_on_a_ppo_run_or_a_missing_folder_is_a_config_error(tmp_path: Path) -> None:
    _run(tmp_path / "ppo", TrainConfig())
    with pytest.raises(ConfigError, match="'recipe'.*'ppo' run"):
        train_job(["recipe=token_vla_ppo"], str(tmp_path / "ppo"))
    with pytest.raises(ConfigError, match="no checkpoint"):
        train_job([], str(tmp_path / "missing"))


def test_resuming_a_path_loads_the_run_config_with_overrides_on_top(tmp_path: Path) -> None:
    checkpoint = _run(tmp_path / "run", TrainConfig(seed=7, total_env_steps=640))
    cfg = job_config("ppo", ["total_env_steps=1280", "resume=ignored"], str(tmp_path / "run"))
    assert (cfg.seed, cfg.total_env_steps, cfg.resume) == (7, 1280, str(checkpoint.resolve()))
    by_override = job_config("ppo", [f"resume={tmp_path / 'run'}"])
    assert by_override.resume == str(checkpoint.resolve()) and by_override.seed == 7


@pytest.mark.parametrize("job", ["ppo", "sft"])
def test_resume_auto_composes_a_new_config_that_continues_its_run_dir(job: str) -> None:
    assert job_config(job, ["seed=5"], "auto").resume == "auto"
    assert job_config(job, ["seed=5", "resume=auto"]).resume == "auto"
    fresh = job_config(job, ["seed=5"])
    assert fresh.resume is None and fresh.seed == 5 and fresh.job == job


@pytest.mark.parametrize("job", ["rl", "sft"])
def test_a_config_of_another_job_is_refused_naming_the_key(job: str) -> None:
    with pytest.raises(ConfigError, match="config key 'job'"):
        job_config("ppo", [f"job={job}"])


def test_a_group_choice_on_a_resumed_path_is_a_config_error_naming_the_group(tmp_path: Path) -> None:
    """``env=push`` has nothing to choose from in a saved config: refused by name, not as an unknown
    ``env.*`` key on the next override."""
    checkpoint = _run(tmp_path / "run", TrainConfig())
    with pytest.raises(ConfigError, match="config key 'env': the group choice 'env=push'"):
        job_config("ppo", ["env=push", "env.num_envs=8", f"resume={checkpoint}"])
    assert job_config("ppo", ["env.num_envs=8", f"resume={checkpoint}"]).env.num_envs == 8
