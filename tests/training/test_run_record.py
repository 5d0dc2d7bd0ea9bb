"""A run folder names its config and the code that ran it, one provenance line per start."""

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import vla_rl
from vla_rl.training.run_record import git_state, record_run_start


@dataclass
class TinyConfig:
    steps: int = 3
    name: str = "tiny"


def git(directory: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, check=True)
    return done.stdout


def test_each_start_writes_the_config_and_adds_a_provenance_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    record_run_start(run_dir, TinyConfig())
    record_run_start(run_dir, TinyConfig(steps=5))  # a resumed run: the config is rewritten, the line added
    assert OmegaConf.load(run_dir / "config.yaml") == {"steps": 5, "name": "tiny"}
    lines = [json.loads(line) for line in (run_dir / "provenance.jsonl").read_text().splitlines()]
    assert len(lines) == 2
    assert lines[0]["vla_rl"] == vla_rl.__version__
    assert "torch" in lines[0]["packages"]
    assert set(lines[0]) == set(lines[1])


def test_git_state_names_the_commit_and_uncommitted_changes(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    assert git_state(tmp_path) == (head, False)
    (tmp_path / "code.py").write_text("x = 2\n")
    assert git_state(tmp_path) == (head, True)


def test_outside_a_checkout_the_git_fields_are_empty(tmp_path: Path) -> None:
    assert git_state(tmp_path) == (None, None)


def test_a_learner_token_is_kept_out_of_the_saved_config_and_the_recorded_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vla_rl.config.load import ConfigError
    from vla_rl.registry import resolve
    from vla_rl.training.jobs import JOBS, job_config

    token = "s3cret-42"
    overrides = ["algorithm=sac", "env=reach", "source=remote", f"remote.token={token}"]
    monkeypatch.setattr("sys.argv", ["vla-rl", "train", *overrides])
    record_run_start(tmp_path, job_config("off_policy", overrides))
    saved = (tmp_path / "config.yaml").read_text()
    assert token not in saved and "token: <not saved>" in saved
    argv = json.loads((tmp_path / "provenance.jsonl").read_text())["argv"]
    assert (
        token not in json.dumps(argv)
        and argv[-1] == "remote.token=<not saved>"
        and argv[2] == "algorithm=sac"
    )
    # The path a resume takes: the saved config, the command line's overrides on top.
    schema = resolve(JOBS, "off_policy", "job")
    with pytest.raises(ConfigError, match="remote.token"):
        schema.load_file(tmp_path / "config.yaml", [])
    assert schema.load_file(tmp_path / "config.yaml", [f"remote.token={token}"]).remote.token == token
