import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from vla_rl.algorithms import PPO, PPOConfig, build_algorithm, registered_algorithms
from vla_rl.algorithms.ppo import adapt_learning_rate, gaussian_kl, linear_learning_rate
from vla_rl.policies import ActorCriticPolicy, PolicyConfig, build_policy
from vla_rl.rollout import RolloutBuffer

OBS_SPACE = gym.spaces.Dict({"proprio": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)})
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def rollout_buffer(policy: ActorCriticPolicy, num_steps: int = 8, num_envs: int = 4) -> RolloutBuffer:
    buffer = RolloutBuffer(num_steps, num_envs, OBS_SPACE, action_dim=2)
    generator = torch.Generator().manual_seed(3)
    with torch.inference_mode():
        for _ in range(num_steps):
            obs = {"proprio": torch.randn(num_envs, 3, generator=generator)}
            step = policy.act(obs)
            reward = torch.randn(num_envs, generator=generator)
            done = torch.rand(num_envs, generator=generator) < 0.2
            buffer.add(obs, step.action, step.log_prob, step.value, reward, done, step.mean, step.std)
    return buffer


def mlp_policy() -> ActorCriticPolicy:
    torch.manual_seed(0)
    return build_policy(PolicyConfig(actor_obs_keys=["proprio"], hidden_sizes=[16]), OBS_SPACE, ACTION_SPACE)


def test_first_minibatch_of_first_epoch_has_ratio_one_and_no_clipping():
    policy = mlp_policy()
    buffer = rollout_buffer(policy)
    ppo = PPO(policy, PPOConfig(num_minibatches=2))
    buffer.compute_returns(buffer.last_value, 0.99, 0.95)
    batch = next(buffer.minibatches(2, torch.Generator().manual_seed(0)))
    losses = ppo.compute_losses(batch)
    torch.testing.assert_close(losses.ratio, torch.ones(16), rtol=0, atol=1e-6)
    assert float(losses.clip_fraction) == 0.0
    assert abs(float(losses.kl)) < 1e-10
    assert abs(float(losses.approx_kl)) < 1e-6


class FixedOutputPolicy(ActorCriticPolicy):
    """``evaluate_actions`` returns preset tensors, so the loss maths can be checked by hand."""

    def __init__(self, log_prob, value, entropy) -> None:
        super().__init__(PolicyConfig(actor_obs_keys=[]), OBS_SPACE, ACTION_SPACE)
        self.scale = torch.nn.Parameter(torch.ones(()))
        self.outputs = (log_prob, entropy, value)

    def evaluate_actions(self, obs, action):
        log_prob, entropy, value = self.outputs
        mean = torch.zeros_like(action)
        return log_prob * self.scale, entropy * self.scale, value * self.scale, mean, torch.ones_like(mean)

    def mean_and_value(self, obs):
        raise NotImplementedError

    def get_value(self, obs):
        raise NotImplementedError


def test_clipped_policy_and_value_losses_match_hand_computation():
    policy = FixedOutputPolicy(
        log_prob=torch.log(torch.tensor([1.5, 0.5])),
        value=torch.tensor([0.5, 0.9]),
        entropy=torch.tensor([1.0, 1.0]),
    )
    cfg = PPOConfig(
        clip_ratio=0.2, value_clip=0.2, value_coef=1.0, entropy_coef=0.01, normalize_advantages=False
    )
    batch = {
        "obs": {},
        "actions": torch.zeros(2, 1),
        "log_probs": torch.zeros(2),
        "values": torch.tensor([0.0, 1.0]),
        "returns": torch.tensor([1.0, 0.0]),
        "advantages": torch.tensor([1.0, -2.0]),
        "means": torch.zeros(2, 1),
        "stds": torch.ones(2, 1),
    }
    losses = PPO(policy, cfg).compute_losses(batch)
    # ratio [1.5, 0.5]; sample 0: max(-1*1.5, -1*1.2) = -1.2; sample 1: max(2*0.5, 2*0.8) = 1.6
    assert float(losses.policy_loss) == pytest.approx(0.2)
    assert float(losses.clip_fraction) == 1.0
    # sample 0: max((0.5-1)^2, (0.2-1)^2) = 0.64; sample 1: max(0.81, (0.9-0)^2) = 0.81
    assert float(losses.value_loss) == pytest.approx(0.725)
    assert float(losses.total.detach()) == pytest.approx(0.2 + 0.725 - 0.01 * 1.0)

    unclipped = PPO(policy, PPOConfig(value_clip=0.0, normalize_advantages=False)).compute_losses(batch)
    assert float(unclipped.value_loss) == pytest.approx((0.25 + 0.81) / 2)


def test_gaussian_kl_by_hand():
    # KL(N(0,1) || N(1,2)) = log 2 + (1 + 1) / (2 * 4) - 1/2
    kl = gaussian_kl(torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1), torch.full((1, 1), 2.0))
    torch.testing.assert_close(kl, torch.tensor([math.log(2.0) - 0.25]))


def test_adaptive_learning_rate_moves_the_right_way_and_stays_bounded():
    assert adapt_learning_rate(1e-3, kl=0.05, desired_kl=0.01) == pytest.approx(1e-3 / 1.5)
    assert adapt_learning_rate(1e-3, kl=0.001, desired_kl=0.01) == pytest.approx(1.5e-3)
    assert adapt_learning_rate(1e-3, kl=0.01, desired_kl=0.01) == 1e-3
    assert adapt_learning_rate(1e-5, kl=1.0, desired_kl=0.01) == 1e-5
    assert adapt_learning_rate(9e-3, kl=0.0, desired_kl=0.01) == 1e-2


def test_update_lowers_lr_when_steps_overshoot_the_kl_target():
    policy = mlp_policy()
    buffer = rollout_buffer(policy)
    ppo = PPO(policy, PPOConfig(learning_rate=1e-2, desired_kl=1e-6, num_epochs=2, num_minibatches=2))
    metrics = ppo.update(buffer)
    assert metrics["learning_rate"] < 1e-2
    assert ppo.optimizer.param_groups[0]["lr"] == metrics["learning_rate"]
    fixed = PPO(mlp_policy(), PPOConfig(learning_rate=1e-2, desired_kl=1e-6, lr_schedule="fixed"))
    assert fixed.update(rollout_buffer(fixed.policy))["learning_rate"] == 1e-2


def test_linear_learning_rate_by_hand():
    # 3e-4 * (1 - k / 4) for k = 0..3, then 0.
    expected = [3e-4, 2.25e-4, 1.5e-4, 0.75e-4, 0.0, 0.0]
    assert [linear_learning_rate(3e-4, k, 4) for k in range(6)] == pytest.approx(expected)


def test_linear_schedule_trains_each_update_at_its_rate_and_resumes_the_count():
    policy = mlp_policy()
    cfg = PPOConfig(learning_rate=3e-4, lr_schedule="linear", lr_decay_iterations=4, num_epochs=1)
    ppo = PPO(policy, cfg)
    rates = [ppo.update(rollout_buffer(policy))["learning_rate"] for _ in range(2)]
    assert rates == pytest.approx([3e-4, 2.25e-4])
    resumed = PPO(policy, cfg)
    resumed.load_state_dict(ppo.state_dict())
    rates = [resumed.update(rollout_buffer(policy))["learning_rate"] for _ in range(3)]
    assert rates == pytest.approx([1.5e-4, 0.75e-4, 0.0])
    assert resumed.optimizer.param_groups[0]["lr"] == 0.0
    with pytest.raises(ValueError, match="lr_decay_iterations > 0"):
        PPO(policy, PPOConfig(lr_schedule="linear"))


def test_update_reports_all_metrics_and_changes_the_policy():
    policy = mlp_policy()
    buffer = rollout_buffer(policy)
    before = [p.detach().clone() for p in policy.parameters()]
    metrics = build_algorithm(PPOConfig(num_minibatches=2), policy).update(buffer)
    expected = {"policy_loss", "value_loss", "entropy", "approx_kl", "kl", "clip_fraction", "learning_rate"}
    assert expected | {"grad_norm", "explained_variance", "action_std"} <= set(metrics)
    assert all(math.isfinite(v) for v in metrics.values())
    assert any(not torch.equal(b, p) for b, p in zip(before, policy.parameters(), strict=True))


def test_state_dict_round_trip_restores_lr_and_optimizer():
    policy = mlp_policy()
    ppo = PPO(policy, PPOConfig(desired_kl=1e-6))
    ppo.update(rollout_buffer(policy))
    state = ppo.state_dict()
    other = PPO(policy, PPOConfig())
    other.load_state_dict(state)
    assert other.learning_rate == ppo.learning_rate == other.optimizer.param_groups[0]["lr"]
    assert other.optimizer.state_dict()["state"].keys() == ppo.optimizer.state_dict()["state"].keys()
    assert torch.equal(other.generator.get_state(), ppo.generator.get_state())


def test_unknown_names_raise():
    assert registered_algorithms() == ["ppo"]
    with pytest.raises(ValueError, match="unknown algorithm 'nope'; known: ppo, sac, sft, vla_grpo, vla_ppo"):
        build_algorithm(PPOConfig(name="nope"), mlp_policy())
    with pytest.raises(ValueError, match="'sac' is the off-policy learner"):
        build_algorithm(PPOConfig(name="sac"), mlp_policy())
    with pytest.raises(ValueError, match="lr_schedule"):
        PPO(mlp_policy(), PPOConfig(lr_schedule="cosine"))


def test_transitions_marked_invalid_are_left_out_of_the_losses():
    """Lost steps (a replaced env worker's) weigh nothing: the losses equal those of the batch
    without them, also after advantage normalisation."""
    policy = mlp_policy()
    buffer = rollout_buffer(policy)
    buffer.compute_returns(buffer.last_value, 0.99, 0.95)
    batch = next(buffer.minibatches(1, torch.Generator().manual_seed(0)))
    batch["valid"] = torch.arange(32) % 4 != 1
    ppo = PPO(policy, PPOConfig(num_minibatches=1))
    kept = {name: value[batch["valid"]] for name, value in batch.items() if name != "obs"}
    kept["obs"] = {key: value[batch["valid"]] for key, value in batch["obs"].items()}
    masked, reference = ppo.compute_losses(batch), ppo.compute_losses(kept)
    assert masked.ratio.shape == (24,)
    for name in ("total", "policy_loss", "value_loss", "entropy"):
        torch.testing.assert_close(getattr(masked, name), getattr(reference, name), rtol=0, atol=0)


def test_the_update_starts_from_the_collecting_policy_and_then_takes_in_the_rollouts_statistics():
    """The observation statistics are the same while a rollout is collected and at the update's
    first step (ratios of 1 there), and fold in the rollout's observations after the update."""
    torch.manual_seed(0)
    policy = build_policy(
        PolicyConfig(actor_obs_keys=["proprio"], hidden_sizes=[16], normalize_obs=True),
        OBS_SPACE,
        ACTION_SPACE,
    )
    rms = policy.obs_encoder.normalizers["proprio"]
    rms.update(torch.randn(64, 3))  # statistics from an earlier rollout
    before = (rms.mean.clone(), rms.var.clone(), float(rms.count))
    buffer = rollout_buffer(policy)  # collected by acting, as the collector does
    ppo = PPO(policy, PPOConfig(num_minibatches=2, num_epochs=1))
    buffer.compute_returns(buffer.last_value, 0.99, 0.95)
    first = next(buffer.minibatches(2, torch.Generator().manual_seed(0)))
    torch.testing.assert_close(ppo.compute_losses(first).ratio, torch.ones(16), rtol=0, atol=1e-6)
    ppo.update(buffer)
    observed = buffer.obs["proprio"].reshape(-1, 3).double()
    assert float(rms.count) == before[2] + 32
    n_a, n_b = before[2], 32.0
    expected_mean = (before[0] * n_a + observed.mean(0) * n_b) / (n_a + n_b)
    torch.testing.assert_close(rms.mean, expected_mean)
