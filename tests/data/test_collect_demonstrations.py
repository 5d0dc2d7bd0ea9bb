"""Scripted-expert collection end to end: env -> Episodes -> LeRobot dataset -> read back."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch
from vla_rl.sims.tasks.scripted import scripted_action

from vla_rl.config.load import ConfigError
from vla_rl.data.collect import collect_demonstrations, field_names
from vla_rl.data.config import compose_collect_config
from vla_rl.data.lerobot_format import open_dataset
from vla_rl.envs import EnvConfig, make_env
from vla_rl.training.collect_cli import add_collect_parser, collect_command

SHORT_REACH = ["env=reach", "env.num_envs=3", "env.max_episode_steps=25", "env.image_size=32"]


def _config(tmp_path: Path, *overrides: str):
    return compose_collect_config([*SHORT_REACH, f"output_dir={tmp_path / 'ds'}", *overrides])


def test_collect_records_aligned_observations_and_actions(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "num_episodes=3", "seed=5", "video.lossless=true", "env.cameras=[front,wrist]")
    result = collect_demonstrations(cfg)
    assert (result.episodes_written, result.episodes_attempted, result.successes) == (3, 3, 3)
    assert result.frames_written == 75
    dataset = open_dataset(cfg.output_dir)
    assert dataset.num_episodes == 3 and dataset.fps == 20.0 and dataset.info["robot_type"] == "panda"
    assert dataset.features["action"]["names"] == ["dx", "dy", "dz", "gripper"]
    assert dataset.features["observation.state"]["names"][:2] == ["arm_qpos_0", "arm_qpos_1"]
    assert "expert_action" not in dataset.features

    env = make_env(
        EnvConfig(task="reach", num_envs=3, max_episode_steps=25, image_size=32, cameras=["front", "wrist"])
    )
    first_obs, _ = env.reset(seed=5)
    env.close()
    for world, episode in enumerate(dataset.episodes()):
        assert len(episode) == 25 and episode.success and episode.success_per_step[-1]
        assert episode.instruction == first_obs["instruction"][world]
        # frame 0 is the reset observation of that world, bit-exact through the lossless video
        np.testing.assert_array_equal(episode.images["front"][0], first_obs["rgb_front"][world].numpy())
        np.testing.assert_array_equal(episode.images["wrist"][0], first_obs["rgb_wrist"][world].numpy())
        np.testing.assert_array_equal(episode.proprio[0], first_obs["proprio"][world].numpy())
        # each recorded action is the expert's action for the observation recorded with it
        obs = {
            "proprio": torch.from_numpy(episode.proprio),
            "privileged": torch.from_numpy(episode.privileged),
        }
        np.testing.assert_array_equal(episode.actions, scripted_action("reach", obs).numpy())


def test_noisy_collection_keeps_clean_expert_labels(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "num_episodes=2", "noise_std=0.2", "env.cameras=[]")
    collect_demonstrations(cfg)
    episode = open_dataset(cfg.output_dir).episode(0)
    expert = episode.extras["expert_action"]
    assert not np.array_equal(episode.actions[:, :3], expert[:, :3])
    np.testing.assert_array_equal(episode.actions[:, 3], expert[:, 3])
    obs = {"proprio": torch.from_numpy(episode.proprio), "privileged": torch.from_numpy(episode.privileged)}
    np.testing.assert_array_equal(expert, scripted_action("reach", obs).numpy())


def test_failures_are_dropped_or_kept_labelled(tmp_path: Path) -> None:
    # two steps are far too few to grasp and lift the cube: every attempt fails
    base = ["env=lift", "env.num_envs=3", "env.max_episode_steps=2", "env.cameras=[]", "num_episodes=2"]
    dropped = collect_demonstrations(
        compose_collect_config([*base, "max_attempts=3", f"output_dir={tmp_path}/a"])
    )
    assert (dropped.episodes_written, dropped.episodes_attempted, dropped.successes) == (0, 3, 0)
    kept = collect_demonstrations(
        compose_collect_config([*base, "keep_failures=true", f"output_dir={tmp_path}/b"])
    )
    assert (kept.episodes_written, kept.episodes_attempted) == (2, 2)
    episodes = list(open_dataset(kept.path).episodes())
    assert [episode.success for episode in episodes] == [False, False]
    assert open_dataset(kept.path).episode_rows[0]["success"] is False


def test_collect_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_collect_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["collect", *SHORT_REACH, "env.cameras=[]", "num_episodes=2", f"output_dir={tmp_path}/cli"]
    )
    assert collect_command(args) == 0
    assert "wrote 2 episodes (50 frames)" in capsys.readouterr().out
    assert open_dataset(tmp_path / "cli").num_episodes == 2
    args = parser.parse_args(
        ["collect", *SHORT_REACH, "env.cameras=[]", "num_episodes=2", f"output_dir={tmp_path}/cli"]
    )
    with pytest.raises(ConfigError, match="'output_dir': .*cli already holds a dataset; pass append=true"):
        collect_command(args)
    more = [
        "collect",
        *SHORT_REACH,
        "env.cameras=[]",
        "num_episodes=1",
        "append=true",
        f"output_dir={tmp_path}/cli",
    ]
    args = parser.parse_args(more)
    assert collect_command(args) == 0
    assert open_dataset(tmp_path / "cli").num_episodes == 3


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("num_episodes=0", "'num_episodes': must be positive"),
        ("env.control_mode=joint_delta", "'env.control_mode': the built-in tasks' scripted experts act in"),
        ("noise_std=-1", "'noise_std': must not be negative"),
        ("env.task=stack", "'env.task': no scripted expert for 'stack'"),
        ("+collect_speed=3", "unknown config key 'collect_speed'"),
        ("env=metaworld", "'env.backend': scripted experts run in mujoco, libero .MetaWorld's: python -m"),
        ("env=libero env.task=libero_goal/3", "'env.task': the scripted LIBERO expert picks and places in"),
    ],
)
def test_invalid_collect_configs_name_the_key(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compose_collect_config(override.split())


def test_default_config_is_pick_place_with_a_64px_front_camera() -> None:
    cfg = compose_collect_config([])
    assert (cfg.env.task, cfg.env.cameras, cfg.env.image_size, cfg.env.split) == (
        "pick_place",
        ["front"],
        64,
        "train",
    )
    assert cfg.output_dir == "datasets/pick_place_train"
    assert cfg.video.settings().codec == "libx264"


def test_field_names_expand_multi_dimensional_fields() -> None:
    assert field_names((("tcp_pos", 3), ("gripper_opening_m", 1))) == [
        "tcp_pos_0",
        "tcp_pos_1",
        "tcp_pos_2",
        "gripper_opening_m",
    ]
