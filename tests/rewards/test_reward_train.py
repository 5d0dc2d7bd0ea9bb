"""``vla-rl reward-train`` end to end on small recorded datasets, and PPO trained on its model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from vla_rl.cli import main
from vla_rl.rewards import build_reward_model

IMAGE_PX = 48


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, str]:
    """Expert demonstrations and noisy failures of reach, plus a held-out mix (real MuJoCo, 48 px)."""
    root = tmp_path_factory.mktemp("reward_data")
    sets = {
        "demos": (4, 0.3, 0),
        "failures": (4, 8.0, 1),
        "held_out_demos": (2, 0.3, 2),
        "held_out": (2, 8.0, 3),
    }
    for name, (episodes, noise, seed) in sets.items():
        code = main(
            [
                "collect",
                "env=reach",
                "env.num_envs=2",
                "env.cameras=[front]",
                f"env.image_size={IMAGE_PX}",
                "video.lossless=true",
                "keep_failures=true",
                f"num_episodes={episodes}",
                f"noise_std={noise}",
                f"seed={seed}",
                f"output_dir={root / name}",
            ]
        )
        assert code == 0
    return {name: str(root / name) for name in sets}


def reward_train(datasets: dict[str, str], output: Path, *overrides: str) -> int:
    """``vla-rl reward-train`` of a few steps on the reach demonstrations and failures."""
    return main(
        [
            "reward-train",
            "task=reach",
            f"datasets=[{datasets['demos']},{datasets['failures']}]",
            f"eval_datasets=[{datasets['held_out_demos']},{datasets['held_out']}]",
            f"model.image_size={IMAGE_PX}",
            "steps=5",
            "batch_size=16",
            "torch_num_threads=1",
            f"output_dir={output}",
            *overrides,
        ]
    )


def test_reward_train_writes_a_loadable_model_and_held_out_metrics(datasets, tmp_path, capsys) -> None:
    output = tmp_path / "model"
    assert reward_train(datasets, output) == 0
    assert "success AUROC" in capsys.readouterr().out
    quality = json.loads((output / "metrics.json").read_text())["quality"]
    assert quality["episodes"] == 4 and quality["frames"] == 4 * 50
    assert 0.0 <= quality["success_auroc"] <= 1.0
    assert -1.0 <= quality["progress_spearman_true"] <= 1.0
    model = build_reward_model("learned", str(output))
    assert model.image_size == IMAGE_PX

    # PPO on the model's reward alone runs through `vla-rl train` (a few iterations).
    code = main(
        [
            "train",
            "reward=learned",
            f"reward.path={output}",
            "reward.cameras=[front]",
            "env.cameras=[front]",
            f"env.image_size={IMAGE_PX}",
            "env.num_envs=4",
            "algorithm.num_steps=8",
            "total_env_steps=64",
            "eval.num_episodes=0",
            "logger.progress_bar=false",
            "logger.wandb_mode=disabled",
            f"run_dir={tmp_path / 'run'}",
        ]
    )
    assert code == 0


def test_reward_train_labels_progress_from_the_recorded_state(datasets, tmp_path) -> None:
    """``progress_labels=task_state`` reads the privileged state the datasets recorded: every
    training frame gets a progress label, including the noisy episodes that failed."""
    from vla_rl.rewards.fit import load_frames

    frames = load_frames([datasets["failures"]], ["front"], "task_state", "reach")
    episodes = frames.episode.unique().tolist()
    failed = [e for e in episodes if float(frames.success[frames.episode == e].max()) == 0]
    assert failed, "the noisy set should hold failed episodes"
    in_failed = torch.isin(frames.episode, torch.tensor(failed))
    assert bool(frames.progress_mask[in_failed].all())  # time-based labels would leave these out
    assert float(frames.progress.min()) >= 0.0 and float(frames.progress.max()) <= 1.0
    assert float(frames.progress[in_failed].max()) > 0.0  # a failed episode got somewhere first
    output = tmp_path / "model"
    assert reward_train(datasets, output, "progress_labels=task_state") == 0
    record = json.loads((output / "metrics.json").read_text())
    assert record["config"]["progress_labels"] == "task_state"
    assert -1.0 <= record["quality"]["progress_spearman_labels"] <= 1.0


def test_reward_train_config_errors(tmp_path) -> None:
    assert main(["reward-train", f"output_dir={tmp_path}"]) == 2  # no datasets
    assert main(["reward-train", "datasets=[x]", "steps=0"]) == 2
    assert main(["reward-train", "datasets=[x]", "learning_rat=1"]) == 2
    assert main(["reward-train", "datasets=[x]", "task=push", "progress_labels=steps"]) == 2
    assert main(["reward-train", "datasets=[x]", "task=lift", "progress_labels=task_state"]) == 2


def test_collect_records_a_trained_policys_rollouts(tmp_path) -> None:
    """The failures a reward model should also learn from: a PPO policy's own episodes."""
    from vla_rl.data.lerobot_format import open_dataset

    run_dir = tmp_path / "run"
    common = ["env.num_envs=2", "env.num_threads=1", "logger.progress_bar=false"]
    train = ["train", *common, "algorithm.num_steps=8", "total_env_steps=32", "eval.num_episodes=0"]
    assert main([*train, "logger.wandb_mode=disabled", f"run_dir={run_dir}"]) == 0
    output = tmp_path / "rollouts"
    code = main(
        [
            "collect",
            "env=reach",
            *common[:2],
            "env.cameras=[front]",
            f"env.image_size={IMAGE_PX}",
            f"policy_checkpoint={run_dir}",
            "keep_failures=true",
            "num_episodes=2",
            f"output_dir={output}",
        ]
    )
    assert code == 0
    dataset = open_dataset(output)
    assert dataset.num_episodes == 2
    episode = dataset.episode(0)
    assert episode.images["front"].shape == (50, IMAGE_PX, IMAGE_PX, 3)
    assert "expert_action" not in episode.extras  # a policy has no separate clean label
