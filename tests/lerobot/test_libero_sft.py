"""``vla-rl sft`` on LIBERO's LeRobot datasets: LeRobot 0.4's own writer builds a small dataset with the
features of LIBERO's (two 3-channel square cameras ``image`` and ``wrist_image``, 8 state values, 7
action values, fps 10, a task per episode), in the hub's layout with frames in the parquet files or in
videos and in openpi's layout; the demonstrations the trainer reads are LeRobot's frames value for value,
and the command users run trains a tiny pi0 on them and saves it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.data.lerobot_format import open_dataset
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.checkpoint import list_checkpoints
from vla_rl.training.sft.chunk_sampler import ChunkSampler
from vla_rl.training.sft.demonstrations import load_demonstrations
from vla_rl.training.sft.trainer import POLICY_DIRNAME

REPO = Path(__file__).resolve().parents[2]
LAYOUT_KEYS = {
    "lerobot": ("observation.images.image", "observation.images.wrist_image", "observation.state", "action"),
    "openpi": ("image", "wrist_image", "state", "actions"),
}
"""The feature keys ``lerobot_libero_dataset.py`` writes per layout: agent view, wrist, state, action."""
CAMERAS = ("image", "wrist_image")
STEPS = 3


def libero_sft_overrides(root: Path, run_dir: Path) -> list[str]:
    """The overrides of the docs' command (docs/guide/sft.md), with a tiny pi0 and a few steps."""
    return [
        f"data.path={root}",
        "sft/policy=pi0",
        "policy.kwargs.camera_keys=[image,wrist_image]",
        "policy.kwargs.proprio_dim=8",
        "policy.kwargs.action_dim=7",
        "policy.kwargs.chunk_len=4",
        "optim.warmup_steps=0",
        f"steps={STEPS}",
        "batch_size=4",
        f"checkpoint_interval={STEPS}",
        "eval.num_episodes=0",
        "torch_num_threads=1",
        "logger.progress_bar=false",
        "logger.tensorboard=true",
        "logger.wandb_mode=disabled",
        f"run_dir={run_dir}",
    ]


@pytest.mark.parametrize(
    ("layout", "camera_dtype", "size"),
    [("lerobot", "image", 32), ("lerobot", "video", 64), ("openpi", "image", 32)],
    ids=["frames_in_parquet", "video", "openpi_names"],
)
def test_sft_trains_on_a_libero_dataset_lerobot_wrote(
    tmp_path: Path, run_lerobot, layout: str, camera_dtype: str, size: int
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root, out = tmp_path / "libero", tmp_path / "lerobot.npz"
    read = run_lerobot("lerobot_libero_dataset.py", layout, camera_dtype, size, root, out, out=out)
    assert str(read["codebase_version"]) == "v3.0" and int(read["fps"]) == 10
    agent_key, wrist_key, state_key, action_key = LAYOUT_KEYS[layout]
    dataset = open_dataset(root)
    assert dataset.features[agent_key]["dtype"] == camera_dtype
    assert dataset.cameras == {"image": agent_key, "wrist_image": wrist_key}

    # what the trainer reads (SFTTrainer loads data.path with load_demonstrations) is what LeRobot returns
    episodes = load_demonstrations(root)
    assert len(episodes) == int(read["num_episodes"])
    assert sum(len(e) for e in episodes) == int(read["num_frames"])
    for camera, key in zip(CAMERAS, (agent_key, wrist_key), strict=True):
        frames = np.concatenate([e.images[camera] for e in episodes])
        assert frames.shape[1:] == (size, size, 3)
        np.testing.assert_array_equal(frames, read[f"frames/{key}"], err_msg=camera)
    np.testing.assert_array_equal(np.concatenate([e.proprio for e in episodes]), read[f"frames/{state_key}"])
    np.testing.assert_array_equal(np.concatenate([e.actions for e in episodes]), read[f"frames/{action_key}"])
    assert [e.instruction for e in episodes for _ in range(len(e))] == read["frames/task"].tolist()
    assert all(e.extras == {} for e in episodes)

    # the command users run
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "vla_rl.cli", "sft", *libero_sft_overrides(root, run_dir)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    assert f"trained {STEPS} steps" in result.stdout
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    losses = [event.value for event in events.Scalars("train/loss")]
    assert len(losses) == STEPS and all(np.isfinite(losses)), losses
    saved = list_checkpoints(run_dir / "checkpoints")[-1] / POLICY_DIRNAME
    policy = load_chunk_policy("pi0", saved)
    assert policy.action_dim == 7 and policy.chunk_len == 4
    # the saved policy acts on a recorded observation (both cameras, the 8 state values)
    obs = ChunkSampler(episodes[:1], policy.chunk_len, 1).collate([0]).obs
    assert sorted(obs) == ["instruction", "proprio", "rgb_image", "rgb_wrist_image"], sorted(obs)
    with torch.no_grad():
        actions = policy.sample(obs, deterministic=True).actions
    assert actions.shape == (1, 4, 7) and torch.isfinite(actions).all()


pytestmark = pytest.mark.slow
