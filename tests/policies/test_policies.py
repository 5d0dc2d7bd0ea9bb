import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from vla_rl.policies import PolicyConfig, build_policy, registered_policies
from vla_rl.policies.cnn import GaussianCNNPolicy
from vla_rl.policies.mlp import GaussianMLPPolicy

OBS_SPACE = gym.spaces.Dict(
    {
        "proprio": gym.spaces.Box(-np.inf, np.inf, (5,), np.float32),
        "privileged": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
        "rgb_front": gym.spaces.Box(0, 255, (64, 64, 3), np.uint8),
        "rgb_wrist": gym.spaces.Box(0, 255, (64, 64, 3), np.uint8),
    }
)
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def random_obs(n: int) -> dict:
    return {
        "proprio": torch.randn(n, 5),
        "privileged": torch.randn(n, 3),
        "rgb_front": torch.randint(0, 256, (n, 64, 64, 3), dtype=torch.uint8),
        "rgb_wrist": torch.randint(0, 256, (n, 64, 64, 3), dtype=torch.uint8),
        "instruction": ["reach the cube"] * n,
    }


def small_cfg(**overrides) -> PolicyConfig:
    base = dict(hidden_sizes=[32, 32], cnn_channels=[8, 16, 16], cnn_feature_dim=32)
    base.update(overrides)
    return PolicyConfig(**base)


@pytest.mark.parametrize(
    "cfg",
    [
        small_cfg(),
        small_cfg(critic_obs_keys=["privileged"]),
        small_cfg(name="cnn", actor_obs_keys=["rgb_front", "proprio"]),
        small_cfg(name="cnn", actor_obs_keys=["rgb_front", "rgb_wrist"], share_encoder=False),
        small_cfg(name="cnn", actor_obs_keys=["rgb_front"], critic_obs_keys=["privileged", "proprio"]),
    ],
)
def test_output_shapes_and_evaluate_agrees_with_act(cfg):
    torch.manual_seed(0)
    policy = build_policy(cfg, OBS_SPACE, ACTION_SPACE)
    obs = random_obs(6)
    policy.update_normalizer(obs)
    step = policy.act(obs)
    assert step.action.shape == step.mean.shape == step.std.shape == (6, 4)
    assert step.log_prob.shape == step.value.shape == (6,)
    log_prob, entropy, value, mean, std = policy.evaluate_actions(obs, step.action)
    torch.testing.assert_close(log_prob, step.log_prob)
    torch.testing.assert_close(value, step.value)
    torch.testing.assert_close(value, policy.get_value(obs))
    assert entropy.shape == (6,)
    deterministic = policy.act(obs, deterministic=True)
    torch.testing.assert_close(deterministic.action, deterministic.mean)


def test_log_prob_and_entropy_by_hand_in_one_dimension():
    space = gym.spaces.Dict({"proprio": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
    policy = build_policy(
        PolicyConfig(actor_obs_keys=["proprio"], hidden_sizes=[8], init_log_std=math.log(2.0)),
        space,
        gym.spaces.Box(-1.0, 1.0, (1,), np.float32),
    )
    last = policy.actor[-1]
    torch.nn.init.zeros_(last.weight)
    torch.nn.init.constant_(last.bias, 0.5)  # mean 0.5, std 2
    obs = {"proprio": torch.zeros(1, 2)}
    log_prob, entropy, _, mean, std = policy.evaluate_actions(obs, torch.tensor([[1.5]]))
    # log N(1.5; 0.5, 2) = -0.5 * (1/2)^2 - log 2 - 0.5 log(2 pi) = -0.125 - 0.693147 - 0.918939
    torch.testing.assert_close(log_prob, torch.tensor([-1.737086]))
    # entropy = 0.5 + 0.5 log(2 pi) + log 2
    torch.testing.assert_close(entropy, torch.tensor([2.112086]))
    reference = torch.distributions.Normal(mean, std)
    torch.testing.assert_close(log_prob, reference.log_prob(torch.tensor([[1.5]])).sum(-1))


def test_multidimensional_log_prob_matches_torch_distributions():
    torch.manual_seed(1)
    policy = build_policy(small_cfg(init_log_std=-0.3), OBS_SPACE, ACTION_SPACE)
    obs = random_obs(5)
    action = torch.randn(5, 4)
    log_prob, entropy, _, mean, std = policy.evaluate_actions(obs, action)
    reference = torch.distributions.Normal(mean, std)
    torch.testing.assert_close(log_prob, reference.log_prob(action).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))


def test_initial_actions_are_near_zero_mean():
    policy = build_policy(small_cfg(), OBS_SPACE, ACTION_SPACE)
    assert policy.act(random_obs(64), deterministic=True).action.abs().max() < 0.1


def test_asymmetric_cnn_critic_is_a_plain_mlp_and_shared_encoder_is_shared():
    asym = build_policy(
        small_cfg(name="cnn", actor_obs_keys=["rgb_front"], critic_obs_keys=["privileged"]),
        OBS_SPACE,
        ACTION_SPACE,
    )
    assert isinstance(asym, GaussianCNNPolicy)
    assert asym.critic_encoder is None and asym.critic_image_keys == []
    assert asym.critic[0].in_features == 3
    shared = build_policy(small_cfg(name="cnn", actor_obs_keys=["rgb_front"]), OBS_SPACE, ACTION_SPACE)
    separate = build_policy(
        small_cfg(name="cnn", actor_obs_keys=["rgb_front"], share_encoder=False), OBS_SPACE, ACTION_SPACE
    )
    assert shared.critic_encoder is None and separate.critic_encoder is not None
    # The critic's loss reaches the shared encoder.
    shared.get_value(random_obs(2)).sum().backward()
    assert shared.actor_encoder.convs[0].weight.grad.abs().sum() > 0


def test_normaliser_is_in_the_state_dict_and_used():
    policy = build_policy(small_cfg(actor_obs_keys=["proprio"]), OBS_SPACE, ACTION_SPACE)
    assert isinstance(policy, GaussianMLPPolicy)
    assert "obs_encoder.normalizers.proprio.mean" in policy.state_dict()
    obs = {"proprio": torch.randn(100, 5) * 50 + 20}
    before = policy.get_value(obs)
    policy.update_normalizer(obs)
    assert not torch.allclose(before, policy.get_value(obs))


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        (small_cfg(name="transformer"), "unknown policy 'transformer'; known: chunk_vla, cnn, flow_mlp"),
        (small_cfg(actor_obs_keys=["joint_pos"]), "'joint_pos'.*allowed"),
        (small_cfg(critic_obs_keys=["state"]), "'state'.*allowed"),
        (small_cfg(actor_obs_keys=["rgb_front"]), "use 'cnn'"),
        (small_cfg(activation="swish"), "allowed"),
        (small_cfg(name="cnn", actor_obs_keys=["proprio"]), "rgb_"),
    ],
)
def test_invalid_configs_raise_value_errors_naming_the_choices(cfg, message):
    with pytest.raises(ValueError, match=message):
        build_policy(cfg, OBS_SPACE, ACTION_SPACE)


def test_registry_lists_builtin_policies():
    assert registered_policies() == ["cnn", "mlp"]


def test_default_cnn_forward_backward_on_a_batch_of_1024_stays_within_its_compute_budget():
    """The default CNN's cost, counted (not timed, so a loaded host cannot fail it): a forward and
    backward pass over 1,024 observations took 19.8 GFLOP on 2026-12-05. The bound is twice that: a
    change that doubles the default encoder's compute must be deliberate and move this bound, and
    its effect on speed is measured by `benchmarks.throughput`, not here."""
    torch.manual_seed(0)
    cfg = PolicyConfig(name="cnn", actor_obs_keys=["rgb_front", "proprio"], critic_obs_keys=["privileged"])
    policy = build_policy(cfg, OBS_SPACE, ACTION_SPACE)
    obs = random_obs(1024)
    with FlopCounterMode(display=False) as counter:
        log_prob, entropy, value, _, _ = policy.evaluate_actions(obs, torch.zeros(1024, 4))
        (log_prob.mean() + value.mean()).backward()
    assert 1e9 < counter.get_total_flops() < 2 * 19.8e9
