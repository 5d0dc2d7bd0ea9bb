"""``vla-rl`` end to end in subprocesses: train a tiny job, resume it, evaluate the checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import imageio.v2 as imageio
import pytest

ROOT = Path(__file__).resolve().parents[1]
VLA_RL = Path(sys.executable).parent / "vla-rl"
TOY_MAIN = (
    "import sys; sys.path.insert(0, 'tests/training'); "
    "from vla_rl.cli import main; sys.exit(main(sys.argv[1:]))"
)
QUIET = ["logger.progress_bar=false", "logger.tensorboard=false", "logger.wandb_mode=disabled"]


def _run(command: list[str], timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MUJOCO_GL": "egl", "WANDB_MODE": "disabled"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)


def _toy(*args: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-c", TOY_MAIN, *args])


def test_help_lists_commands() -> None:
    proc = _run([str(VLA_RL), "--help"])
    assert proc.returncode == 0
    for command in ("train", "eval", "collect", "sft"):
        assert command in proc.stdout


def test_config_error_exits_2_naming_the_key(tmp_path: Path) -> None:
    proc = _run([str(VLA_RL), "train", f"run_dir={tmp_path}", "algorithm.learnin_rate=1"])
    assert proc.returncode == 2
    assert "algorithm.learnin_rate" in proc.stderr


def test_toy_train_resume_eval_and_success_target(tmp_path: Path) -> None:
    toy = [
        "env.backend=toy_env:make_toy_point",
        "env.task=point",
        "env.num_envs=4",
        "algorithm.num_steps=10",
        "algorithm.num_minibatches=2",
        "policy.hidden_sizes=[8]",
        "eval.num_episodes=4",
        "eval.video=false",
    ]
    run_dir = tmp_path / "run"
    proc = _toy("train", *toy, *QUIET, f"run_dir={run_dir}", "total_env_steps=80")
    assert proc.returncode == 0, proc.stderr
    assert "trained 2 iterations" in proc.stdout and "success rate" in proc.stdout

    proc = _toy("train", "--resume", str(run_dir), "total_env_steps=120")
    assert proc.returncode == 0, proc.stderr
    assert "trained 3 iterations" in proc.stdout
    assert (run_dir / "checkpoints" / "iter_000003").is_dir()

    proc = _toy("eval", "--checkpoint", str(run_dir), "eval.num_episodes=6", "success_target=1.0")
    assert proc.returncode == 1  # a random-ish toy policy does not reach every target
    summary = json.loads((run_dir / "eval" / "iter_000003" / "eval_summary.json").read_text())
    assert summary["num_episodes"] == 6


@pytest.mark.slow
def test_mujoco_train_then_eval_writes_video_and_summary(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    tiny = [
        "env.num_envs=4",
        "env.num_threads=1",
        "algorithm.num_steps=8",
        "algorithm.num_minibatches=2",
        "total_env_steps=64",
        "eval.num_episodes=4",
        "eval.video_envs=2",
        "eval.video_size=64",
    ]
    proc = _run([str(VLA_RL), "train", *tiny, *QUIET, f"run_dir={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "trained 2 iterations" in proc.stdout
    assert (run_dir / "eval" / "eval.mp4").is_file()

    out_dir = tmp_path / "evaluation"
    proc = _run(
        [str(VLA_RL), "eval", "--checkpoint", str(run_dir), f"output_dir={out_dir}", "eval.num_episodes=4"]
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "success rate" in proc.stdout
    summary = json.loads((out_dir / "eval_summary.json").read_text())
    assert summary["num_episodes"] == 4 and summary["split"] == "train"
    frames = imageio.mimread(out_dir / "eval.mp4")
    assert frames[0].shape == (64, 2 * 64, 3) and len(frames) > 10


@pytest.mark.parametrize("override", ["env.split=ood_position", "+env.split=ood_position"])
def test_eval_refuses_env_split_naming_eval_split(
    override: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``vla-rl eval`` measures ``eval.split``; an ``env.split`` override would be silently ignored, so
    it is a ConfigError (exit 2) that names the key to use, before any checkpoint is read."""
    from vla_rl.cli import main

    code = main(["eval", "--checkpoint", str(tmp_path / "no_such_run"), override])
    assert code == 2
    err = capsys.readouterr().err
    assert "config key 'env.split'" in err
    assert "eval.split=ood_position" in err


@pytest.mark.parametrize(("job", "command"), [("rl", "eval"), ("sft", "eval"), ("sft", "train")])
def test_a_run_of_another_job_is_named_not_misread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], job: str, command: str
) -> None:
    """``vla-rl eval`` evaluates PPO runs and ``vla-rl train --resume`` continues PPO and RL runs: a
    folder of another job is a config error naming it, before anything loads."""
    from vla_rl.cli import main
    from vla_rl.training.checkpoint import save_checkpoint
    from vla_rl.training.chunk_rl.config import VLARLConfig
    from vla_rl.training.sft.config import SFTConfig

    save_checkpoint(tmp_path, 1, None, {}, VLARLConfig() if job == "rl" else SFTConfig())
    flag = "--checkpoint" if command == "eval" else "--resume"
    assert main([command, flag, str(tmp_path)]) == 2
    assert f"is a {job!r} run" in capsys.readouterr().err
