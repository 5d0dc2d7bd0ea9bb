"""``vla-rl sft`` end to end on toy demonstrations (dataset reading stubbed) with a reach evaluation."""

from __future__ import annotations

from pathlib import Path

import pytest
from sft_tiny_policies import toy_episodes

import vla_rl.training.sft.trainer as trainer_module
from vla_rl.cli import build_parser, sft_command
from vla_rl.config.load import ConfigError


def _parse(argv: list[str]):  # noqa: ANN202 - argparse.Namespace
    return build_parser().parse_args(argv)


def _overrides(run_dir: Path) -> list[str]:
    return [
        "data.path=unused",
        "policy.name=sft_tiny_policies:ChunkRegressor",
        "~policy.kwargs",
        "+policy.kwargs={chunk_len: 2, action_dim: 4, obs_dims: {proprio: 24}}",
        "steps=4",
        "batch_size=4",
        "checkpoint_interval=2",
        "eval.num_episodes=2",
        "eval.interval=2",
        "env.num_envs=2",
        "env.num_threads=1",
        "env.max_episode_steps=10",
        "logger.progress_bar=false",
        "logger.tensorboard=false",
        "logger.wandb_mode=disabled",
        f"run_dir={run_dir}",
    ]


@pytest.fixture
def stub_dataset(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    requested: list[str] = []

    def fake_load(path: str, max_episodes: int) -> list:  # noqa: ANN001
        requested.append(path)
        return toy_episodes(3, length=5, proprio_dim=24, action_dim=4)[: max_episodes or None]

    monkeypatch.setattr(trainer_module, "load_demonstrations", fake_load)
    return requested


def test_sft_trains_evaluates_prints_and_resumes(
    tmp_path: Path, stub_dataset: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = _parse(["sft", *_overrides(tmp_path / "run"), "success_target=1.0"])
    assert args.command == "sft"
    code = sft_command(args)
    out = capsys.readouterr().out
    assert "trained 4 steps" in out and "evaluation (2 episodes, split train): success rate" in out
    assert code in (0, 1) and (code == 1) == ("below the target" in out)
    assert stub_dataset == ["unused"]
    assert (tmp_path / "run" / "checkpoints" / "iter_000004" / "policy").is_dir()
    assert (tmp_path / "run" / "eval" / "eval_step_000002.json").is_file()

    resumed = _parse(["sft", "steps=6", "eval.num_episodes=0", "--resume", str(tmp_path / "run")])
    assert sft_command(resumed) == 0
    assert "trained 6 steps" in capsys.readouterr().out


def test_bad_override_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'optim.lr'"):
        sft_command(_parse(["sft", "optim.lr=1", f"run_dir={tmp_path}"]))
    with pytest.raises(ConfigError, match="no checkpoint"):
        sft_command(_parse(["sft", "--resume", str(tmp_path / "missing")]))


def test_missing_dataset_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'data.path'"):
        sft_command(_parse(["sft", f"run_dir={tmp_path}", "logger.wandb_mode=disabled"]))
