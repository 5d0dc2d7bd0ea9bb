"""Spatial-softmax image encoder and the auxiliary state-prediction loss of the CNN policy."""

import pytest
import torch
from test_policies import ACTION_SPACE, OBS_SPACE, random_obs, small_cfg

from vla_rl.algorithms.config import PPOConfig
from vla_rl.algorithms.ppo import PPO
from vla_rl.policies import PolicyConfig, build_policy
from vla_rl.policies.cnn import build_image_encoder
from vla_rl.policies.keypoints import KeypointImageEncoder, SpatialSoftmax


def test_spatial_softmax_of_a_sharp_peak_is_its_position():
    # 3 x 5 map, grid x in {-1, -0.5, 0, 0.5, 1}, y in {-1, 0, 1}; one large value at row 2, col 1.
    maps = torch.zeros(1, 1, 3, 5)
    maps[0, 0, 2, 1] = 100.0
    xy = SpatialSoftmax(3, 5)(maps)
    torch.testing.assert_close(xy, torch.tensor([[[-0.5, 1.0]]]))


def test_spatial_softmax_of_two_equal_peaks_is_their_midpoint_and_a_flat_map_the_centre():
    maps = torch.zeros(2, 1, 3, 5)
    maps[0, 0, 0, 0] = maps[0, 0, 0, 4] = 100.0  # (-1, -1) and (1, -1) -> (0, -1)
    xy = SpatialSoftmax(3, 5)(maps)
    torch.testing.assert_close(xy[0, 0], torch.tensor([0.0, -1.0]))
    torch.testing.assert_close(xy[1, 0], torch.tensor([0.0, 0.0]))


def test_keypoint_encoder_outputs_features_and_keypoints_in_the_unit_square():
    encoder = KeypointImageEncoder(["rgb_front"], OBS_SPACE, [8, 16, 6], 32, "elu")
    obs = random_obs(3)
    assert encoder(obs).shape == (3, 32)
    keypoints = encoder.keypoints(obs)
    assert keypoints.shape == (3, 6, 2)
    assert keypoints.abs().max() <= 1.0


def test_unknown_image_encoder_names_the_known_ones():
    with pytest.raises(ValueError, match="conv.*spatial_softmax"):
        build_image_encoder(PolicyConfig(image_encoder="resnet"), ["rgb_front"], OBS_SPACE)


def _aux_policy(**overrides):
    torch.manual_seed(0)
    cfg = small_cfg(
        name="cnn",
        actor_obs_keys=["rgb_front", "proprio"],
        critic_obs_keys=["proprio"],
        aux_target_key="privileged",
        aux_coef=0.5,
        **overrides,
    )
    return build_policy(cfg, OBS_SPACE, ACTION_SPACE)


def test_auxiliary_loss_is_the_weighted_error_of_the_normalised_target():
    policy = _aux_policy()
    obs = random_obs(5)
    policy.update_normalizer(obs)
    normaliser = policy.obs_encoder.normalizers["privileged"]
    target = ((obs["privileged"].double() - normaliser.mean) / (normaliser.var + 1e-8).sqrt()).float()
    prediction = policy.aux_head(policy.actor_encoder(obs))
    expected = 0.5 * (prediction - target).square().mean()
    torch.testing.assert_close(policy.auxiliary_loss(obs), expected)


def test_ppo_adds_the_auxiliary_loss_and_it_trains_the_actor_encoder_not_the_critic():
    policy = _aux_policy()
    obs = random_obs(8)
    policy.update_normalizer(obs)
    with torch.no_grad():
        step = policy.act(obs)
    batch = {
        "obs": obs,
        "actions": step.action,
        "log_probs": step.log_prob,
        "values": step.value,
        "advantages": torch.zeros(8),
        "returns": step.value,
        "means": step.mean,
        "stds": step.std,
    }
    losses = PPO(policy, PPOConfig(value_clip=0.0)).compute_losses(batch)
    # Zero advantages and returns equal to values: the policy and value losses are 0, so the
    # total is the auxiliary loss alone.
    assert float(losses.policy_loss) == 0.0 and float(losses.value_loss) == 0.0
    torch.testing.assert_close(losses.total, losses.auxiliary_loss)
    assert losses.auxiliary_loss > 0
    losses.total.backward()
    assert policy.actor_encoder.convs[0].weight.grad.abs().sum() > 0
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in policy.critic.parameters())
