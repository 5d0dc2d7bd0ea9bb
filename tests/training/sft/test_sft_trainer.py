"""SFT with a tiny regressor: the loss falls, checkpoints round-trip, a resumed run continues exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sft_tiny_policies import ChunkRegressor, toy_episodes

from vla_rl.config.load import ConfigError
from vla_rl.policies.registry import load_chunk_policy
from vla_rl.training.checkpoint import list_checkpoints, load_checkpoint, save_checkpoint
from vla_rl.training.sft.config import SFTConfig
from vla_rl.training.sft.config_load import validate_sft_config
from vla_rl.training.sft.trainer import POLICY_DIRNAME, SFTTrainer


def _cfg(run_dir: Path, **changes: object) -> SFTConfig:
    raw = {
        "policy": {
            "name": "sft_tiny_policies:ChunkRegressor",
            "kwargs": {"chunk_len": 3, "action_dim": 2, "obs_dims": {"proprio": 3}, "hidden_dim": 32},
        },
        "optim": {"learning_rate": 1e-2, "warmup_steps": 2, "grad_clip_norm": 1.0},
        "eval": {"num_episodes": 0},
        "logger": {"progress_bar": False, "tensorboard": False, "wandb_mode": "disabled"},
        "steps": 8,
        "batch_size": 8,
        "checkpoint_interval": 4,
        "keep_checkpoints": 0,
        "run_dir": str(run_dir),
    }
    for key, value in changes.items():
        group, _, name = key.rpartition(".")
        (raw.setdefault(group, {}) if group else raw)[name] = value
    return validate_sft_config(raw)


def _losses(result) -> list[float]:  # noqa: ANN001 - SFTResult
    return [metrics["train/loss"] for metrics in result.history]


def test_loss_decreases_on_a_toy_dataset(tmp_path: Path) -> None:
    trainer = SFTTrainer(_cfg(tmp_path, steps=60, batch_size=16), toy_episodes(8))
    losses = _losses(trainer.train())
    assert len(losses) == 60
    assert sum(losses[-10:]) / 10 < 0.3 * losses[0]


def test_learning_rate_follows_warmup_and_cosine(tmp_path: Path) -> None:
    result = SFTTrainer(_cfg(tmp_path, steps=6, **{"optim.min_lr_ratio": 0.0}), toy_episodes(2)).train()
    lrs = [metrics["train/learning_rate"] for metrics in result.history]
    assert lrs == pytest.approx([0.5e-2, 1e-2, 1e-2, 0.75e-2, 0.25e-2, 0.0])


def test_max_episodes_takes_the_first_episodes(tmp_path: Path) -> None:
    episodes = toy_episodes(5)
    trainer = SFTTrainer(_cfg(tmp_path, **{"data.max_episodes": 2}), iter(episodes))
    assert trainer.episodes == episodes[:2]
    assert trainer.sampler.num_samples == 2 * len(episodes[0])


def test_boundary_repeats_reach_the_sampler(tmp_path: Path) -> None:
    episodes = toy_episodes(2)
    plain = SFTTrainer(_cfg(tmp_path / "plain"), episodes).sampler.num_samples
    cfg = _cfg(tmp_path / "weighted", **{"data.boundary_repeats": 3, "data.boundary_window": 1})
    weighted = SFTTrainer(cfg, episodes).sampler.num_samples
    # at least each episode's first frame is listed 3 times instead of once
    assert weighted >= plain + 2 * len(episodes)


def test_checkpoint_holds_a_loadable_policy_with_identical_actions(tmp_path: Path) -> None:
    trainer = SFTTrainer(_cfg(tmp_path), toy_episodes(4))
    result = trainer.train()
    assert [p.name for p in list_checkpoints(tmp_path / "checkpoints")] == ["iter_000004", "iter_000008"]
    assert result.last_checkpoint == tmp_path / "checkpoints" / "iter_000008"
    loaded = load_chunk_policy("sft_tiny_policies:ChunkRegressor", result.last_checkpoint / POLICY_DIRNAME)
    assert isinstance(loaded, ChunkRegressor)
    obs = trainer.sampler.collate(range(6)).obs
    for seed in (0, 1):
        torch.manual_seed(seed)
        expected = trainer.policy.sample(obs).actions
        torch.manual_seed(seed)
        torch.testing.assert_close(loaded.sample(obs).actions, expected, rtol=0, atol=0)
    state = load_checkpoint(result.last_checkpoint).trainer_state
    assert state["step"] == 8 and state["policy_name"] == "sft_tiny_policies:ChunkRegressor"


def test_init_from_an_earlier_run_folder_starts_from_its_last_weights(tmp_path: Path) -> None:
    first = SFTTrainer(_cfg(tmp_path / "first"), toy_episodes(4))
    first.train()
    second = SFTTrainer(
        _cfg(tmp_path / "second", **{"policy.init_from": str(tmp_path / "first")}), toy_episodes(4)
    )
    for name, value in first.policy.state_dict().items():
        torch.testing.assert_close(second.policy.state_dict()[name], value, rtol=0, atol=0)


def test_resume_continues_with_the_same_losses_and_weights(tmp_path: Path) -> None:
    episodes = toy_episodes(4)
    straight = SFTTrainer(_cfg(tmp_path / "straight", **{"optim.grad_accum_steps": 2}), episodes)
    expected = _losses(straight.train())

    first = SFTTrainer(_cfg(tmp_path / "split", steps=8, **{"optim.grad_accum_steps": 2}), episodes)
    for _ in range(3):
        first.run_iteration()
    first.save()
    # Drawing more random numbers after the checkpoint must not matter.
    torch.rand(10)
    first.sampler.next_batch()
    resumed_cfg = _cfg(tmp_path / "split", resume=str(tmp_path / "split"), **{"optim.grad_accum_steps": 2})
    resumed = SFTTrainer(resumed_cfg, episodes)
    assert resumed.step == 3
    got = _losses(resumed.train())
    assert got == expected[3:]
    for a, b in zip(straight.policy.state_dict().values(), resumed.policy.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_stop_request_writes_a_checkpoint_and_reports_interrupted(tmp_path: Path) -> None:
    trainer = SFTTrainer(_cfg(tmp_path, steps=100, checkpoint_interval=50), toy_episodes(2))
    original = trainer.run_iteration

    def step_then_stop() -> dict[str, float]:
        metrics = original()
        if trainer.step == 3:
            trainer.request_stop()
        return metrics

    trainer.run_iteration = step_then_stop  # type: ignore[method-assign]
    result = trainer.train()
    assert result.stop_reason == "interrupted" and result.steps == 3
    assert result.last_checkpoint == tmp_path / "checkpoints" / "iter_000003"
    assert result.final_eval is None


def test_action_statistics_are_given_to_policies_that_take_them(tmp_path: Path) -> None:
    episodes = toy_episodes(3)
    trainer = SFTTrainer(
        _cfg(tmp_path, **{"policy.name": "sft_tiny_policies:StatsRecordingRegressor"}), episodes
    )
    low, high = trainer.policy.received
    actions = np.concatenate([episode.actions for episode in episodes])
    torch.testing.assert_close(low, torch.tensor(np.quantile(actions, 0.01, axis=0), dtype=torch.float32))
    torch.testing.assert_close(high, torch.tensor(np.quantile(actions, 0.99, axis=0), dtype=torch.float32))


def test_action_width_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="policy.kwargs.action_dim.*4-dimensional actions"):
        SFTTrainer(_cfg(tmp_path), toy_episodes(2, action_dim=4))


def test_metrics_reach_tensorboard_including_periodic_evaluation(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cfg = _cfg(
        tmp_path,
        steps=4,
        **{
            "logger.tensorboard": True,
            "eval.num_episodes": 2,
            "eval.interval": 2,
            "env.num_envs": 2,
            "env.num_threads": 1,
            "env.max_episode_steps": 5,
            "policy.kwargs": {"chunk_len": 2, "action_dim": 4, "obs_dims": {"proprio": 24}},
        },
    )
    result = SFTTrainer(cfg, toy_episodes(2, proprio_dim=24, action_dim=4)).train()
    assert [step for step, _ in result.evaluations] == [2]
    assert result.final_eval is not None and result.final_eval.num_episodes == 2
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3, 4]
    assert [e.step for e in events.Scalars("eval/success_rate")] == [2, 4]


def test_sigterm_stops_after_the_step_with_a_checkpoint(tmp_path: Path) -> None:
    import os
    import signal

    trainer = SFTTrainer(_cfg(tmp_path, steps=100, checkpoint_interval=50), toy_episodes(2))
    original = trainer.run_iteration

    def step_then_signal() -> dict[str, float]:
        metrics = original()
        if trainer.step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return metrics

    trainer.run_iteration = step_then_signal  # type: ignore[method-assign]
    previous = signal.getsignal(signal.SIGTERM)
    result = trainer.train()
    assert result.stop_reason == "interrupted" and result.steps == 2
    assert load_checkpoint(tmp_path).iteration == 2
    assert signal.getsignal(signal.SIGTERM) is previous


def test_action_key_trains_on_the_clean_expert_column(tmp_path: Path) -> None:
    episodes = toy_episodes(2)
    for episode in episodes:
        episode.extras["expert_action"] = np.zeros_like(episode.actions)
    trainer = SFTTrainer(_cfg(tmp_path / "clean", **{"data.action_key": "expert_action"}), episodes)
    assert all((episode.actions == 0).all() for episode in trainer.episodes)
    assert not all((episode.actions == 0).all() for episode in episodes)  # the inputs are untouched
    with pytest.raises(ConfigError, match="data.action_key.*'noisy'.*has: action, expert_action"):
        SFTTrainer(_cfg(tmp_path / "bad", **{"data.action_key": "noisy"}), episodes)


def test_a_checkpoint_of_the_layout_before_the_one_loop_resumes_exactly(tmp_path: Path) -> None:
    """Releases before the one loop wrote ``step``, ``optimizer`` and ``scheduler`` at the top of
    the trainer state (no ``iteration``, no ``algorithm``)."""
    episodes = toy_episodes(4)
    straight = SFTTrainer(_cfg(tmp_path / "straight"), episodes)
    expected = _losses(straight.train())
    first = SFTTrainer(_cfg(tmp_path / "old", steps=8), episodes)
    for _ in range(3):
        first.run_iteration()
    state = first.state_dict()
    old = {key: value for key, value in state.items() if key not in ("iteration", "elapsed_s", "algorithm")}
    old.update(state["algorithm"])
    save_checkpoint(
        tmp_path / "old",
        3,
        None,
        old,
        first.cfg,
        write_extra=lambda d: first.policy.save_pretrained(d / "policy"),
    )
    assert set(load_checkpoint(tmp_path / "old").trainer_state) == {
        "step", "policy_name", "optimizer", "scheduler", "sampler", "rng", "wandb_run_id"
    }  # fmt: skip
    resumed = SFTTrainer(_cfg(tmp_path / "old", resume=str(tmp_path / "old")), episodes)
    assert _losses(resumed.train()) == expected[3:]
