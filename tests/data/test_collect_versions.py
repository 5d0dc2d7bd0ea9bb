"""``vla-rl collect`` in either LeRobot dataset version: the same episodes, a clear error on a mismatch."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from vla_rl.config.load import ConfigError
from vla_rl.data.collect import collect_demonstrations
from vla_rl.data.config import compose_collect_config
from vla_rl.data.lerobot_format import open_dataset
from vla_rl.data.lerobot_reader import LeRobotDataset
from vla_rl.data.lerobot_v3_reader import LeRobotV3Dataset
from vla_rl.training.collect_cli import add_collect_parser, collect_command

SHORT_REACH = [
    "env=reach",
    "env.num_envs=2",
    "env.max_episode_steps=10",
    "env.image_size=32",
    "num_episodes=2",
]


def test_v30_and_v21_collections_hold_the_same_episodes(tmp_path: Path) -> None:
    common = [*SHORT_REACH, "seed=3", "video.lossless=true", "noise_std=0.1"]
    collect_demonstrations(
        compose_collect_config([*common, "codebase_version=v3.0", f"output_dir={tmp_path}/a"])
    )
    collect_demonstrations(
        compose_collect_config([*common, "codebase_version=v2.1", f"output_dir={tmp_path}/b"])
    )
    v30, v21 = open_dataset(tmp_path / "a"), open_dataset(tmp_path / "b")
    assert type(v30) is LeRobotV3Dataset and type(v21) is LeRobotDataset
    assert v30.info["codebase_version"] == "v3.0" and v21.info["codebase_version"] == "v2.1"
    assert v30.features == v21.features and v30.tasks == v21.tasks
    for a, b in zip(v30.episodes(), v21.episodes(), strict=True):
        assert (a.instruction, a.success) == (b.instruction, b.success)
        np.testing.assert_array_equal(a.images["front"], b.images["front"])
        for name in ("proprio", "actions", "privileged", "success_per_step"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        np.testing.assert_array_equal(a.extras["expert_action"], b.extras["expert_action"])
    stats = v30.dataset_stats()
    np.testing.assert_allclose(stats["action"]["mean"], v21.action_stats()["mean"], rtol=1e-12)


def test_codebase_version_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'codebase_version': must be one of v2.1, v3.0"):
        compose_collect_config(["codebase_version=v3"])
    parser = argparse.ArgumentParser()
    add_collect_parser(parser.add_subparsers(dest="command"))
    base = ["collect", *SHORT_REACH, "env.cameras=[]", f"output_dir={tmp_path}/cli"]
    assert collect_command(parser.parse_args([*base, "codebase_version=v2.1"])) == 0
    appending = [*base, "append=true", "codebase_version=v3.0"]
    with pytest.raises(
        ConfigError, match="'codebase_version': .*cli holds a v2.1 dataset; append to it with"
    ):
        collect_command(parser.parse_args(appending))


def test_collect_writes_v30_by_default_finalised_every_50_episodes() -> None:
    config = compose_collect_config([])
    assert config.codebase_version == "v3.0" and config.finalize_every_episodes == 50
    with pytest.raises(ConfigError, match="'finalize_every_episodes': must not be negative"):
        compose_collect_config(["finalize_every_episodes=-1"])
    with pytest.raises(ConfigError, match="'video.keyframe_interval': must not be negative"):
        compose_collect_config(["video.keyframe_interval=-1"])
    assert compose_collect_config(["video.keyframe_interval=2"]).video.settings().keyframe_interval == 2
    lossless = compose_collect_config(["video.keyframe_interval=2", "video.lossless=true"]).video.settings()
    assert (lossless.codec, lossless.crf, lossless.keyframe_interval) == ("libx264rgb", 0, 2)
