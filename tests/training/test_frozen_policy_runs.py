"""``vla-rl train algorithm=sac`` through a frozen flow policy that a real (two-step) SFT run saved:
DSRL and residual runs on MuJoCo ``reach`` update, evaluate through the frozen policy, checkpoint and
resume exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.training.jobs import job_config, train_job
from vla_rl.training.off_policy.frozen_policy_env import NoiseActionEnv, ResidualActionEnv
from vla_rl.training.off_policy.trainer import OffPolicyTrainer
from vla_rl.training.sft.trainer import SFTTrainer

REACH_PROPRIO_DIM = 24
REACH_PRIVILEGED_DIM = 6
QUIET = ["logger.progress_bar=false", "logger.tensorboard=false", "logger.wandb_mode=disabled"]
TINY_RUN = [
    "algorithm=sac",
    "env=reach",
    "env.num_envs=2",
    "env.num_threads=1",
    "env.max_episode_steps=8",
    "policy.hidden_sizes=[16,16]",
    "replay.batch_size=8",
    "replay.learning_starts=8",
    "eval.num_episodes=2",
    "eval.interval_env_steps=0",
    "torch_num_threads=1",
    *QUIET,
]
MODES = {
    "dsrl": ["frozen_policy.mode=dsrl", "frozen_policy.execute_steps=2"],  # the keys alone
    "residual": ["frozen_policy=residual", "frozen_policy.execute_steps=2"],  # the config group
}


def random_episodes(count: int, length: int = 8) -> list[Episode]:
    rng = np.random.default_rng(0)
    return [
        Episode(
            images={},
            proprio=rng.normal(size=(length, REACH_PROPRIO_DIM)).astype(np.float32),
            actions=rng.uniform(-1, 1, size=(length, 4)).astype(np.float32),
            privileged=rng.normal(size=(length, REACH_PRIVILEGED_DIM)).astype(np.float32),
            instruction="move the gripper to the target",
            success=True,
        )
        for _ in range(count)
    ]


@pytest.fixture(scope="module")
def sft_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flow_mlp SFT run folder (``configs/sft/policy/flow_mlp.yaml``: chunks of 4 actions, on
    proprio and privileged state; 3 denoising steps) after 2 steps on random demonstrations."""
    run_dir = tmp_path_factory.mktemp("sft_run")
    cfg = job_config(
        "sft",
        [
            "sft/policy=flow_mlp",
            "policy.kwargs.hidden_sizes=[32]",
            "+policy.kwargs.num_denoising_steps=3",
            "steps=2",
            "batch_size=4",
            "eval.num_episodes=0",
            f"run_dir={run_dir}",
            *QUIET,
        ],
    )
    SFTTrainer(cfg, random_episodes(4)).train()
    return run_dir


def trainer(run_dir: Path, sft_run: Path, mode: str, *extra: str) -> OffPolicyTrainer:
    overrides = [*TINY_RUN, *MODES[mode], f"frozen_policy.checkpoint={sft_run}", f"run_dir={run_dir}", *extra]
    assert train_job(overrides, None) == "off_policy"
    return OffPolicyTrainer(job_config("off_policy", overrides))


def test_dsrl_acts_in_the_noise_of_the_sft_run_policy_and_evaluates_through_it(
    tmp_path: Path, sft_run: Path
) -> None:
    run = trainer(tmp_path, sft_run, "dsrl", "total_env_steps=16")
    assert (
        isinstance(run.env, NoiseActionEnv) and run.policy.action_dim == 4 * 4
    )  # the family came from the run
    result = run.train()
    assert (result.env_steps, result.stop_reason) == (16, "total_env_steps")
    assert result.history[-1]["train/critic_loss"] > 0 and len(run.replay) == 16
    assert [steps for steps, _ in result.evaluations] == [16]  # the 16-wide SAC actor ran through the flow


def test_residual_reads_the_frozen_action(tmp_path: Path, sft_run: Path) -> None:
    run = trainer(tmp_path, sft_run, "residual", "total_env_steps=16")
    assert isinstance(run.env, ResidualActionEnv) and run.policy.action_dim == 4
    assert run.policy.obs_keys == ["proprio", "privileged", "base_action"]
    result = run.train()
    assert result.env_steps == 16 and [steps for steps, _ in result.evaluations] == [16]
    stored = run.replay.sample(8, torch.Generator().manual_seed(0)).obs["base_action"]
    assert stored.abs().max() <= 1.0 and stored.abs().sum() > 0


@pytest.mark.parametrize("mode", ["dsrl", "residual"])
def test_resumed_run_makes_the_same_updates_as_an_uninterrupted_one(
    tmp_path: Path, sft_run: Path, mode: str
) -> None:
    straight = trainer(tmp_path / "straight", sft_run, mode, "total_env_steps=24").train()
    first = trainer(tmp_path / "split", sft_run, mode, "total_env_steps=12").train()
    split = str(tmp_path / "split")  # --resume PATH: the run's own config.yaml, the budget raised
    assert train_job(["total_env_steps=24"], split) == "off_policy"
    resumed = OffPolicyTrainer(job_config("off_policy", ["total_env_steps=24"], split))
    assert resumed.env_steps == 12
    second = resumed.train()

    def losses(history: list[dict[str, float]]) -> list[dict[str, float]]:
        return [{k: v for k, v in m.items() if k.startswith("train/")} for m in history]

    assert losses(first.history + second.history) == losses(straight.history)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["frozen_policy.mode=foo"], "frozen_policy.mode"),
        (["frozen_policy.mode=dsrl"], "frozen_policy.checkpoint"),  # no checkpoint
        (
            ["frozen_policy.mode=residual", "frozen_policy.checkpoint=run"],
            "policy.obs_keys",
        ),  # no base_action
        (["policy.obs_keys=[proprio,base_action]"], "policy.obs_keys"),  # base_action without residual
        (["frozen_policy=dsrl", "frozen_policy.checkpoint=run", "demos.path=demos"], "demos.path"),
        (["frozen_policy=dsrl", "frozen_policy.checkpoint=run", "source=remote"], "frozen_policy.mode"),
        (
            ["frozen_policy=residual", "frozen_policy.checkpoint=run", "frozen_policy.residual_scale=0"],
            "frozen_policy.residual_scale",
        ),
    ],
)
def test_frozen_policy_settings_are_checked_before_any_work(overrides: list[str], key: str) -> None:
    with pytest.raises(ConfigError, match=f"config key '{key}'"):
        job_config("off_policy", ["algorithm=sac", *overrides])
