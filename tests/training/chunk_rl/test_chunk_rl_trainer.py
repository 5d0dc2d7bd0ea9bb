"""``vla-rl train recipe=...`` end to end: a tiny flow policy fine-tuned on ``reach`` (real MuJoCo)."""

from __future__ import annotations

import json

import pytest
import torch
from tiny_chunk_rl import flow_policy_dir, overrides

from vla_rl.cli import main
from vla_rl.config.load import ConfigError
from vla_rl.policies.registry import build_chunk_policy
from vla_rl.training.checkpoint import load_checkpoint
from vla_rl.training.chunk_rl.config_load import compose_rl_config
from vla_rl.training.chunk_rl.trainer import ChunkRLTrainer, load_rl_policy


def test_ppo_run_evaluates_before_and_after_checkpoints_and_resumes(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", *overrides(run_dir, flow_policy_dir(tmp_path))]) == 0
    printed = capsys.readouterr().out
    assert "trained 2 iterations" in printed and "before RL" in printed
    evaluations = json.loads((run_dir / "evaluations.json").read_text())
    assert [entry["iteration"] for entry in evaluations] == [0, 1, 2]
    assert (run_dir / "checkpoints" / "iter_000002" / "policy" / "flow_mlp_config.json").is_file()
    saved = json.loads(
        (run_dir / "checkpoints" / "iter_000002" / "policy" / "flow_mlp_config.json").read_text()
    )
    assert saved["exploration"] == "flow_sde"  # the recipe's exploration was applied
    first_elapsed_s = load_checkpoint(run_dir / "checkpoints" / "iter_000002").trainer_state["elapsed_s"]
    assert first_elapsed_s > 0
    assert main(["train", "--resume", str(run_dir), "iterations=3"]) == 0
    assert "trained 3 iterations" in capsys.readouterr().out
    evaluations = json.loads((run_dir / "evaluations.json").read_text())
    assert evaluations[-1]["iteration"] == 3
    # The resumed run continues the clock: its minutes (and max_minutes) count the first part too.
    assert evaluations[-1]["minutes"] * 60 > first_elapsed_s
    last_state = load_checkpoint(run_dir / "checkpoints" / "iter_000003").trainer_state
    assert last_state["elapsed_s"] > first_elapsed_s


@pytest.mark.parametrize(
    ("field", "value"),
    [("chain_log_prob", "mean"), ("noise_mean", "euler")],  # the recipe runs "sum" and "sde"
)
def test_flow_noise_run_saves_an_overridden_exploration_field_with_the_policy(tmp_path, field, value):
    run_dir = tmp_path / "run"
    args = [*overrides(run_dir, flow_policy_dir(tmp_path), "pi0_flow_noise_ppo"), "iterations=1"]
    assert main(["train", *args, f"++policy.exploration.{field}={value}"]) == 0
    saved = json.loads(
        (run_dir / "checkpoints" / "iter_000001" / "policy" / "flow_mlp_config.json").read_text()
    )
    assert (saved["exploration"], saved[field]) == ("flow_noise", value)


@pytest.mark.parametrize("curriculum_pool", [0, 3])
def test_grpo_iteration_collects_groups_and_logs_their_counts(tmp_path, curriculum_pool):
    cfg = compose_rl_config(
        [
            *overrides(tmp_path / "run", flow_policy_dir(tmp_path), "token_vla_grpo", "vla_grpo"),
            "algorithm.group_size=2",
            f"algorithm.curriculum_pool={curriculum_pool}",
        ]
    )
    trainer = ChunkRLTrainer(cfg)
    try:
        metrics = trainer.run_iteration()
        if curriculum_pool:
            # The drawn states' estimates moved from their prior of 0.5 towards their groups' success.
            assert (trainer.source.curriculum.success != 0.5).any()
        else:
            assert trainer.source.group_counter == 2 * metrics["train/sampling_rounds"]
    finally:
        trainer.close()
    rounds = metrics["train/sampling_rounds"]
    assert 1 <= rounds <= cfg.algorithm.max_sampling_rounds
    assert metrics["train/groups"] == 2 * rounds
    assert metrics["rollout/episodes"] == 4 * rounds
    assert "perf/rollout_time_s" in metrics and "perf/policy_time_s" in metrics


def test_grpo_with_returns_to_go_updates_the_policy_from_a_real_rollout(tmp_path):
    cfg = compose_rl_config(
        [
            *overrides(tmp_path / "run", flow_policy_dir(tmp_path), "token_vla_grpo", "vla_grpo"),
            "algorithm.group_size=2",
            "algorithm.keep_success_range=[0.0,1.0]",  # every group trains, whatever its success
            "algorithm.score=return_to_go",
            "algorithm.progress_shaping=10.0",  # rewards that differ between the worlds
        ]
    )
    trainer = ChunkRLTrainer(cfg)
    try:
        before = {k: v.clone() for k, v in trainer.policy.state_dict().items()}
        metrics = trainer.run_iteration()
        after = trainer.policy.state_dict()
    finally:
        trainer.close()
    assert metrics["train/trained_decisions"] > 0
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize(("groups_per_update", "rounds"), [(0, 1), (5, 3)])
def test_grpo_collects_rounds_until_the_update_has_its_groups(tmp_path, groups_per_update, rounds):
    cfg = compose_rl_config(
        [
            *overrides(tmp_path / "run", flow_policy_dir(tmp_path), "token_vla_grpo", "vla_grpo"),
            "algorithm.group_size=2",  # 4 worlds: 2 groups per rollout
            "algorithm.keep_success_range=[0.0,1.0]",  # every group counts, whatever its success
            f"algorithm.groups_per_update={groups_per_update}",
            "algorithm.max_sampling_rounds=4",
        ]
    )
    trainer = ChunkRLTrainer(cfg)
    try:
        metrics = trainer.run_iteration()
    finally:
        trainer.close()
    assert metrics["train/sampling_rounds"] == rounds
    assert metrics["train/kept_groups"] == 2 * rounds


def test_freeze_keeps_the_named_parameters_fixed(tmp_path):
    init_from = flow_policy_dir(tmp_path)
    cfg = compose_rl_config(
        [
            *overrides(tmp_path / "run", init_from),
            "policy.freeze=[encoder.]",
            "algorithm.critic_warmup_iterations=0",
        ]
    )
    trainer = ChunkRLTrainer(cfg)
    try:
        before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters()}
        trainer.run_iteration()
        after = dict(trainer.policy.named_parameters())
        assert all(torch.equal(before[n], after[n]) for n in before if n.startswith("encoder."))
        assert not torch.equal(before["velocity_net.0.weight"], after["velocity_net.0.weight"])
    finally:
        trainer.close()
    with pytest.raises(ConfigError, match="policy.freeze"):
        ChunkRLTrainer(
            compose_rl_config([*overrides(tmp_path / "run2", init_from), "policy.freeze=[nothing.]"])
        )


@pytest.mark.parametrize("model_weight", [0.0, 1.0])
def test_a_reward_model_pays_the_vla_learner(tmp_path, model_weight):
    """With the environment's weight 0 the returns are the model's: all zero at model weight 0."""
    from vla_rl.rewards.env_wrapper import RewardModelEnv
    from vla_rl.rewards.learned import LearnedRewardConfig, LearnedRewardModel

    image_px = 48
    torch.manual_seed(0)
    LearnedRewardModel(LearnedRewardConfig(image_size=image_px)).save_pretrained(tmp_path / "reward_model")
    cfg = compose_rl_config(
        [
            *overrides(tmp_path / "run", flow_policy_dir(tmp_path)),
            "reward=learned",
            f"reward.path={tmp_path / 'reward_model'}",
            "reward.cameras=[front]",
            f"reward.model_weight={model_weight}",
            "env.cameras=[front]",
            f"env.image_size={image_px}",
            "env.max_episode_steps=4",  # two decisions of two executed steps: every episode ends
        ]
    )
    trainer = ChunkRLTrainer(cfg)
    try:
        assert isinstance(trainer.env, RewardModelEnv)
        metrics = trainer.run_iteration()
    finally:
        trainer.close()
    if model_weight == 0.0:
        assert metrics["rollout/mean_return"] == 0.0
    else:
        assert metrics["rollout/mean_return"] > 0.0  # the model's scores are probabilities in (0, 1)


def test_eval_num_envs_fixes_the_evaluated_episodes_whatever_the_training_worlds(tmp_path):
    """The episodes of an evaluation follow from its world count: ``eval.num_envs=2`` under 4
    training worlds evaluates what a 2-world run evaluates, and 4 evaluation worlds something else."""
    from vla_rl.training.chunk_rl.trainer import evaluate_rl_policy, load_rl_policy

    init_from = flow_policy_dir(tmp_path)

    def returns(*extra: str) -> float:
        cfg = compose_rl_config([*overrides(tmp_path / "run", init_from), "eval.num_episodes=4", *extra])
        policy = load_rl_policy(cfg, init_from)
        return evaluate_rl_policy(policy, cfg, "train", deterministic=False).mean_return

    two_world_run = returns("env.num_envs=2")
    assert returns("env.num_envs=4", "eval.num_envs=2") == two_world_run
    assert returns("env.num_envs=4") != two_world_run


def test_eval_temperature_samples_the_evaluation_apart_from_the_rollouts(tmp_path):
    """``eval.temperature`` replaces the rollouts' ``algorithm.temperature`` in sampled evaluations
    (here the flow policy's noise multiplier); unset, the evaluation samples as the rollouts do."""
    from vla_rl.training.chunk_rl.trainer import evaluate_rl_policy, load_rl_policy

    init_from = flow_policy_dir(tmp_path)

    def returns(*extra: str) -> float:
        cfg = compose_rl_config([*overrides(tmp_path / "run", init_from), "eval.num_episodes=4", *extra])
        policy = load_rl_policy(cfg, init_from)
        return evaluate_rl_policy(policy, cfg, "train", deterministic=False).mean_return

    hot, cool = returns("algorithm.temperature=3.0"), returns("algorithm.temperature=1.0")
    assert returns("algorithm.temperature=1.0", "eval.temperature=3.0") == hot
    assert returns("algorithm.temperature=3.0", "eval.temperature=1.0") == cool
    assert cool != hot
    with pytest.raises(ConfigError, match="eval.temperature"):
        compose_rl_config([*overrides(tmp_path / "run", init_from), "eval.temperature=0"])


def test_rl_token_policies_decode_only_the_executed_actions(tmp_path):
    torch.manual_seed(0)
    policy = build_chunk_policy("token_vla", chunk_len=4, action_dim=4, use_proprio=True, proprio_dim=5)
    policy.save_pretrained(tmp_path / "token_vla")
    cfg = compose_rl_config(["recipe=token_vla_ppo", f"policy.init_from={tmp_path / 'token_vla'}"])
    assert cfg.algorithm.execute_steps == 2
    policy = load_rl_policy(cfg, tmp_path / "token_vla")
    assert policy.decoded_steps == 2 and policy.chunk_len == 4


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_policy_lora_adds_adapters_to_a_pi0_saved_without_them_and_trains_only_those(tmp_path, dtype):
    """`policy.lora` on a pi0 saved without adapters: RL trains the adapters, the heads and pi0's
    action/state/time projections; the base weights stay as loaded (in `policy.dtype`); the
    checkpoint keeps the adapters."""
    torch.manual_seed(0)
    start = build_chunk_policy(
        "pi0", chunk_len=4, action_dim=4, proprio_dim=24, num_denoising_steps=3, image_size=32
    )
    start.save_pretrained(tmp_path / "pi0")
    run_dir = tmp_path / "run"
    args = [
        *overrides(run_dir, tmp_path / "pi0", "pi0_flow_sde_ppo"),
        "policy.name=pi0",
        "env.cameras=[front]",
        "env.image_size=32",
        "iterations=1",
        "algorithm.critic_warmup_iterations=0",  # the actor's first update is the one checked
        "policy.lora={rank: 4}",
        f"policy.dtype={dtype}",
    ]
    assert main(["train", *args]) == 0
    trained = load_rl_policy(compose_rl_config(args), run_dir / "checkpoints" / "iter_000001" / "policy")
    assert trained.cfg.lora is not None and trained.cfg.lora.rank == 4
    assert trained.model.dtype == getattr(torch, dtype)
    trained_state = trained.state_dict()
    assert any("lora_B" in name and value.abs().sum() > 0 for name, value in trained_state.items())
    base = {name.replace(".base_layer.", "."): value for name, value in trained_state.items()}
    for name, value in start.state_dict().items():
        if name.startswith("model.") and not name.startswith(
            ("model.action_out_proj.", "model.embed_action_time.")
        ):
            assert torch.equal(base[name], value.to(base[name].dtype)), name
    start_out = start.state_dict()["model.action_out_proj.weight"]
    assert not torch.equal(trained_state["model.action_out_proj.weight"], start_out.to(trained.model.dtype))


def test_an_iteration_under_bf16_autocast_keeps_ratios_near_one_and_moves_float32_weights(tmp_path):
    """``policy.autocast=bfloat16``: a whole iteration (rollout, recomputation, update, evaluation)
    runs; the ratios stay near 1 (measured 1.006 averaged over the update's four steps) and the
    float32 weights move."""
    cfg = compose_rl_config(
        [*overrides(tmp_path / "run", flow_policy_dir(tmp_path)), "policy.autocast=bfloat16"]
    )
    trainer = ChunkRLTrainer(cfg)
    try:
        before = {name: value.clone() for name, value in trainer.policy.state_dict().items()}
        metrics = trainer.run_iteration()
    finally:
        trainer.close()
    assert trainer.policy.autocast_dtype == torch.bfloat16
    after = trainer.policy.state_dict()
    assert all(value.dtype == torch.float32 for value in after.values() if value.is_floating_point())
    assert any(not torch.equal(before[name], value) for name, value in after.items())
    assert all(torch.isfinite(torch.tensor(value)) for value in metrics.values())
    assert abs(metrics["train/ratio_mean"] - 1.0) < 0.1, metrics["train/ratio_mean"]
