"""Exploration noise annealed over the run's updates: the schedule's numbers, its checks, and a run."""

from __future__ import annotations

import math

import pytest
import torch
from tiny_chunk_rl import flow_policy_dir, overrides

from vla_rl.config.load import ConfigError
from vla_rl.policies.flow.exploration import NoiseHead
from vla_rl.training.checkpoint import resolve_policy_dir
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.exploration_anneal import (
    annealed_exploration,
    exploration_metrics,
    run_updates,
)
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer, load_rl_policy


@pytest.mark.parametrize(
    ("update", "level"),
    [(0, 0.5), (10, 0.45), (20, 0.4), (40, 0.3), (80, 0.3)],
)
def test_the_noise_level_moves_linearly_and_holds_at_its_end(update, level):
    # 0.5 -> 0.3 over 40 updates: 0.05 per 10 updates, held at 0.3 afterwards.
    settings = annealed_exploration({"noise_level": 0.5}, {"noise_level": 0.3}, 40, update)
    assert settings == {"noise_level": pytest.approx(level)}


def test_bounds_move_entry_by_entry():
    # Halfway from [0.08, 0.16] to [0.04, 0.08] is [0.06, 0.12].
    settings = annealed_exploration(
        {"noise_std_bounds": [0.08, 0.16]}, {"noise_std_bounds": [0.04, 0.08]}, 30, 15
    )
    assert settings["noise_std_bounds"] == pytest.approx([0.06, 0.12])
    assert exploration_metrics(settings) == {
        "exploration/noise_std_bounds_min": pytest.approx(0.06),
        "exploration/noise_std_bounds_max": pytest.approx(0.12),
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["+policy.exploration_final.sde_one_step=true"],
            "unknown config key 'policy.exploration_final.sde_one_step'",
        ),
        (
            ["+policy.exploration_final.noise_level=0.1"],
            "'policy.exploration_anneal_updates': must be positive when exploration_final is set",
        ),
        (
            ["policy.exploration_anneal_updates=-1"],
            "'policy.exploration_anneal_updates': must not be negative",
        ),
        (["policy.exploration_anneal_updates=1.5"], "'policy.exploration_anneal_updates'"),
        (
            ["+policy.exploration_final.noise_std_bounds=[0.04,0.08]", "policy.exploration_anneal_updates=5"],
            "needs its start in policy.exploration.noise_std_bounds",
        ),
        (
            ["+policy.exploration_final.noise_level=[0.1,0.2]", "policy.exploration_anneal_updates=5"],
            "noise_level",
        ),
        (
            ["+policy.exploration_final.noise_level=-0.1", "policy.exploration_anneal_updates=5"],
            "'policy.exploration_final.noise_level': must not be negative",
        ),
        (
            [
                "+policy.exploration.noise_std_bounds=[0.08,0.16]",
                "+policy.exploration_final.noise_std_bounds=[0.1,0.05]",
                "policy.exploration_anneal_updates=5",
            ],
            "min < max",
        ),
    ],
)
def test_bad_anneal_settings_fail_before_any_work(extra, message):
    with pytest.raises(ConfigError, match=message):
        compose_rl_config(["recipe=pi0_flow_sde", "policy.init_from=x", *extra])


def test_moving_the_bounds_keeps_the_heads_place_between_them():
    torch.manual_seed(0)
    head = NoiseHead(feature_dim=3, out_dim=2, std_min=0.08, std_max=0.16)
    features = torch.randn(5, 3)
    assert torch.allclose(head(features), torch.full((5, 2), math.sqrt(0.08 * 0.16)))  # fresh head
    torch.nn.init.normal_(head.net[-1].weight)
    before = head(features)
    fraction = (before.log() - math.log(0.08)) / (math.log(0.16) - math.log(0.08))
    head.set_bounds(0.04, 0.08)
    expected = torch.exp(math.log(0.04) + fraction * (math.log(0.08) - math.log(0.04)))
    assert torch.allclose(head(features), expected)


def test_a_run_anneals_before_its_rollouts_and_a_loaded_checkpoint_takes_the_noise_of_its_update(tmp_path):
    # The recipe starts at a = 0.3; annealed to 0.1 at update 2: update 0 samples at 0.3, update 1
    # at 0.2, and a checkpoint after 2 updates is loaded (for evaluation or a resume) at 0.1.
    cfg = compose_rl_config(
        [
            *overrides(tmp_path / "run", flow_policy_dir(tmp_path)),
            "+policy.exploration_final.noise_level=0.1",
            "policy.exploration_anneal_updates=2",
        ]
    )
    assert cfg.policy.exploration.noise_level == 0.3
    trainer = ChunkRLTrainer(cfg)
    try:
        assert trainer.policy.cfg.noise_level == 0.3  # loaded at update 0
        result = trainer.train()
    finally:
        trainer.close()
    assert [row["exploration/noise_level"] for row in result.history] == [
        pytest.approx(0.3),
        pytest.approx(0.2),
    ]
    assert trainer.policy.cfg.noise_level == pytest.approx(0.2)
    updates = run_updates(cfg.policy, tmp_path / "run")
    assert updates == 2
    policy_dir = resolve_policy_dir(tmp_path / "run")
    assert load_rl_policy(cfg, policy_dir).cfg.noise_level == 0.3
    assert load_rl_policy(cfg, policy_dir, updates).cfg.noise_level == pytest.approx(0.1)
