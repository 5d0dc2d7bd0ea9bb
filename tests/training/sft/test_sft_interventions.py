"""SFT on recorded interventions (HG-DAgger): which frames are targets, how chunks are cut at the end of
an intervention segment, and the loss they give, worked out by hand on a 6-step recording written by
the LeRobot writer and read back as ``vla-rl sft`` reads it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.config.load import ConfigError
from vla_rl.data.episode import Episode
from vla_rl.data.lerobot_format import write_dataset
from vla_rl.training.sft.chunk_sampler import ChunkSampler, chunk_indices
from vla_rl.training.sft.config import SFTConfig
from vla_rl.training.sft.config_load import validate_sft_config
from vla_rl.training.sft.demonstrations import action_quantiles, load_demonstrations
from vla_rl.training.sft.interventions import INTERVENTION_COLUMN, UNSYNCED_COLUMN
from vla_rl.training.sft.trainer import SFTTrainer

FLAGS = [False, True, True, False, True, True]
"""Policy, a two-step takeover, policy, a takeover to the end of the episode."""


def _recording(
    root: Path, with_flags: bool = True, flags: list[bool] = FLAGS, unsynced: list[bool] | None = None
) -> Path:
    steps = np.arange(6, dtype=np.float32)
    extras = {INTERVENTION_COLUMN: np.array(flags)} if with_flags else {}
    if unsynced is not None:
        extras[UNSYNCED_COLUMN] = np.array(unsynced)
    episode = Episode(
        images={},
        proprio=np.stack([steps, -steps, steps / 2], axis=1),
        actions=np.stack([steps / 10, -steps / 10], axis=1),  # a_t = (t/10, -t/10)
        instruction="pick",
        success=False,
        extras=extras,
    )
    return write_dataset(root, [episode], fps=20.0)


def _cfg(data_path: Path, run_dir: Path, **data: object) -> SFTConfig:
    return validate_sft_config(
        {
            "data": {"path": str(data_path), **data},
            "policy": {
                "name": "sft_tiny_policies:ChunkRegressor",
                "kwargs": {"chunk_len": 3, "action_dim": 2, "obs_dims": {"proprio": 3}, "hidden_dim": 4},
            },
            "optim": {"learning_rate": 1e-3, "warmup_steps": 0},
            "eval": {"num_episodes": 0},
            "logger": {"progress_bar": False, "tensorboard": False, "wandb_mode": "disabled"},
            "steps": 2,
            "batch_size": 64,
            "checkpoint_interval": 100,
            "run_dir": str(run_dir),
        }
    )


def test_a_chunk_ends_with_its_intervention_segment() -> None:
    flags = np.array(FLAGS)
    # From step 1: steps 1, 2 are the takeover, step 3 the policy's; 4 would be the next takeover.
    rows, mask = chunk_indices(6, 1, 4, flags)
    assert rows.tolist() == [1, 2, 2, 2] and mask.tolist() == [True, True, False, False]
    # From step 4 the segment runs to the episode's end: the episode's padding cuts it.
    rows, mask = chunk_indices(6, 4, 4, flags)
    assert rows.tolist() == [4, 5, 5, 5] and mask.tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="not a labelled frame"):
        chunk_indices(6, 3, 4, flags)


def test_intervention_only_samples_the_takeover_frames_with_cut_chunks(tmp_path: Path) -> None:
    data = _recording(tmp_path / "rec")
    (episode,) = load_demonstrations(data)
    assert episode.extras[INTERVENTION_COLUMN].tolist() == FLAGS
    trainer = SFTTrainer(_cfg(data, tmp_path / "run", intervention_only=True))
    sampler = trainer.sampler
    assert sampler.num_samples == 4  # frames 1, 2, 4, 5
    batch = sampler.collate(range(4))
    assert batch.step_index.tolist() == [1, 2, 4, 5]
    assert batch.chunk_mask.tolist() == [
        [True, True, False],  # 1, 2 | 3 is the policy's
        [True, False, False],  # 2 | 3 is the policy's
        [True, True, False],  # 4, 5 | the episode ends
        [True, False, False],
    ]
    # Masked steps repeat the segment's last action: a_t = (t/10, -t/10).
    expected = [[1, 2, 2], [2, 2, 2], [4, 5, 5], [5, 5, 5]]
    targets = torch.tensor([[[t / 10, -t / 10] for t in row] for row in expected])
    torch.testing.assert_close(batch.action_chunk, targets)
    assert batch.obs["proprio"][:, 0].tolist() == [1.0, 2.0, 4.0, 5.0]


def test_the_loss_averages_only_the_takeover_steps(tmp_path: Path) -> None:
    """A regressor predicting (0, 0) everywhere: the loss is the mean over unmasked steps of
    (a1^2 + a2^2) / 2 = (t/10)^2. Unmasked steps: 1, 2 | 2 | 4, 5 | 5, so
    (1 + 4 + 4 + 16 + 25 + 25) / 100 / 6 = 0.125. With every frame a target (no option) the 6 samples
    of 3 steps hold 15 real steps: (0+1+4 + 1+4+9 + 4+9+16 + 9+16+25 + 16+25 + 25) / 100 / 15 =
    164 / 1500."""
    data = _recording(tmp_path / "rec")
    for options, expected in (({"intervention_only": True}, 0.125), ({}, 164 / 1500)):
        trainer = SFTTrainer(_cfg(data, tmp_path / f"run{len(options)}", **options))
        policy = trainer.policy
        with torch.no_grad():
            policy.net[2].weight.zero_()
            policy.net[2].bias.zero_()
        batch = trainer.sampler.collate(range(trainer.sampler.num_samples))
        loss = policy.sft_loss(batch.obs, batch.action_chunk, batch.chunk_mask).loss
        assert float(loss.detach()) == pytest.approx(expected)


def test_training_steps_draw_only_intervention_frames(tmp_path: Path) -> None:
    data = _recording(tmp_path / "rec")
    trainer = SFTTrainer(_cfg(data, tmp_path / "run", intervention_only=True, boundary_repeats=1))
    drawn = set()
    for _ in range(5):
        drawn.update(trainer.sampler.next_batch().step_index.tolist())
    assert drawn == {1, 2, 4, 5}
    assert len(trainer.train().history) == 2


def test_intervention_repeats_weight_takeover_frames_among_all(tmp_path: Path) -> None:
    data = _recording(tmp_path / "rec")
    sampler: ChunkSampler = SFTTrainer(_cfg(data, tmp_path / "run", intervention_repeats=3)).sampler
    # 2 policy frames once, 4 intervention frames 3 times each.
    assert sampler.num_samples == 2 + 4 * 3
    counts = np.bincount(sampler.sample_step, minlength=6).tolist()
    assert counts == [1, 3, 3, 1, 3, 3]
    # Every frame is a target here: the chunk from step 2 runs on through the policy's step 3.
    assert sampler.collate([int(np.flatnonzero(sampler.sample_step == 2)[0])]).chunk_mask.tolist() == [
        [True, True, True]
    ]


def test_action_statistics_come_from_the_labels() -> None:
    steps = np.arange(6, dtype=np.float32)
    episode = Episode({}, np.zeros((6, 1), np.float32), steps[:, None], "", False)
    low, high = action_quantiles([episode], 0.0, 1.0, [np.array(FLAGS)])
    assert (float(low), float(high)) == (1.0, 5.0)  # frames 0 and 3 are the policy's


def test_recordings_without_the_flag_or_without_interventions_are_refused(tmp_path: Path) -> None:
    plain = _recording(tmp_path / "plain", with_flags=False)
    with pytest.raises(ConfigError, match="'data.intervention_only'.*no 'intervention' column"):
        SFTTrainer(_cfg(plain, tmp_path / "a", intervention_only=True))
    with pytest.raises(ConfigError, match="'data.intervention_repeats'.*no 'intervention' column"):
        SFTTrainer(_cfg(plain, tmp_path / "b", intervention_repeats=2))
    untouched = _recording(tmp_path / "untouched", flags=[False] * 6)
    with pytest.raises(ConfigError, match="'data.intervention_only'.*no intervention frame"):
        SFTTrainer(_cfg(untouched, tmp_path / "c", intervention_only=True))
    with pytest.raises(ConfigError, match="'data.intervention_repeats'.*positive"):
        _cfg(plain, tmp_path / "d", intervention_repeats=0)


def test_the_columns_are_the_ones_deployments_record() -> None:
    from vla_rl.real_world.recording import IMAGES_UNSYNCED_KEY, INTERVENTION_KEY

    assert (INTERVENTION_COLUMN, UNSYNCED_COLUMN) == (INTERVENTION_KEY, IMAGES_UNSYNCED_KEY)


LAGGING = [False, False, True, False, False, True]
"""Frames 2 (in the first takeover) and 5 (in the second) have images older than their state."""


def test_no_sample_starts_on_a_frame_whose_images_lag(tmp_path: Path) -> None:
    data = _recording(tmp_path / "rec", unsynced=LAGGING)
    every = SFTTrainer(_cfg(data, tmp_path / "every")).sampler
    assert every.num_samples == 4
    batch = every.collate(range(4))
    assert batch.step_index.tolist() == [0, 1, 3, 4]
    # A lagging frame's action is still a target inside a chunk from an earlier frame.
    assert batch.chunk_mask.tolist() == [[True] * 3, [True] * 3, [True] * 3, [True, True, False]]
    takeovers = SFTTrainer(_cfg(data, tmp_path / "only", intervention_only=True)).sampler
    assert takeovers.collate(range(takeovers.num_samples)).step_index.tolist() == [1, 4]
    weighted = SFTTrainer(_cfg(data, tmp_path / "weighted", intervention_repeats=3)).sampler
    assert np.bincount(weighted.sample_step, minlength=6).tolist() == [1, 3, 0, 1, 3, 0]
    lagging = _recording(tmp_path / "lagging", unsynced=[True] * 6)
    with pytest.raises(ConfigError, match="'data.path': every frame of the 1 recorded episodes"):
        SFTTrainer(_cfg(lagging, tmp_path / "none"))


def test_the_aggregate_adds_every_frame_of_the_demonstrations(tmp_path: Path) -> None:
    """HG-DAgger's aggregate: the recording's 4 takeover frames plus the 6 frames of a demonstration
    (no intervention column: the expert drove all of it), each once; a demonstration's chunk runs
    uncut to the episode's end."""
    recording = _recording(tmp_path / "rec")
    demos = _recording(tmp_path / "demos", with_flags=False)
    trainer = SFTTrainer(_cfg(recording, tmp_path / "run", intervention_only=True, demonstrations=str(demos)))
    sampler = trainer.sampler
    assert sampler.num_samples == 4 + 6 and len(trainer.episodes) == 2
    batch = sampler.collate(range(sampler.num_samples))
    assert batch.step_index.tolist() == [1, 2, 4, 5, 0, 1, 2, 3, 4, 5]
    assert batch.chunk_mask[4:].tolist() == [[True] * 3] * 4 + [[True, True, False], [True, False, False]]
    repeats = SFTTrainer(
        _cfg(recording, tmp_path / "run2", intervention_repeats=3, demonstrations=str(demos))
    ).sampler
    assert repeats.num_samples == (2 + 4 * 3) + 6
    # Both options: the takeovers are the recording's only labels, each drawn 3 times.
    weighted = SFTTrainer(
        _cfg(
            recording,
            tmp_path / "run4",
            intervention_only=True,
            intervention_repeats=3,
            demonstrations=str(demos),
        )
    ).sampler
    assert weighted.num_samples == 4 * 3 + 6
    assert np.bincount(weighted.sample_step[weighted.sample_episode == 0], minlength=6).tolist() == [
        0,
        3,
        3,
        0,
        3,
        3,
    ]
    with pytest.raises(ConfigError, match="'data.demonstrations': no dataset folder"):
        SFTTrainer(_cfg(recording, tmp_path / "run3", demonstrations=str(tmp_path / "absent")))
