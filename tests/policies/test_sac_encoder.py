"""The off-policy learner's observation encoder: camera features then vector keys, uint8 scaled inside,
no weights without cameras; and ``SACPolicy`` built on it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from vla_rl.policies.sac_encoder import SACObsEncoder, conv_output_px
from vla_rl.policies.sac_networks import SACPolicy

SMALL_CONVS = [[3, 2], [3, 1]]
"""Two convolutions that fit 16x16 images: 16 -> 7 -> 5."""


def space(image_px: int = 16, cameras: tuple[str, ...] = ("front", "wrist")) -> gym.spaces.Dict:
    spaces: dict[str, gym.Space] = {
        "proprio": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
        "privileged": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
    }
    for camera in cameras:
        spaces[f"rgb_{camera}"] = gym.spaces.Box(0, 255, (image_px, image_px, 3), np.uint8)
    return gym.spaces.Dict(spaces)


def observation(batch: int = 5, image_px: int = 16, seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)

    def image() -> torch.Tensor:
        return torch.randint(0, 256, (batch, image_px, image_px, 3), dtype=torch.uint8, generator=generator)

    return {
        "rgb_front": image(),
        "rgb_wrist": image(),
        "proprio": torch.randn(batch, 4, generator=generator),
        "privileged": torch.randn(batch, 3, generator=generator),
    }


def pixel_encoder(feature_dim: int = 8) -> SACObsEncoder:
    torch.manual_seed(0)
    keys = ["rgb_front", "rgb_wrist", "proprio"]
    return SACObsEncoder(keys, space(), [4, 6], SMALL_CONVS, feature_dim)


def test_conv_output_px_by_hand() -> None:
    assert conv_output_px(64, [[3, 2], [3, 1], [3, 1], [3, 1]]) == 25  # 64 -> 31 -> 29 -> 27 -> 25
    assert conv_output_px(64, [[8, 4], [4, 2], [3, 1]]) == 4  # 64 -> 15 -> 6 -> 4
    assert conv_output_px(16, SMALL_CONVS) == 5
    assert conv_output_px(4, [[3, 2], [3, 1]]) == 0  # 4 -> 1, then no room for a 3x3


def test_image_features_come_first_scaled_from_uint8_then_the_vector_keys_unchanged() -> None:
    encoder = pixel_encoder()
    obs = observation()
    features = encoder(obs)
    assert features.shape == (5, 8 + 4) and encoder.output_dim == 12
    assert torch.equal(features[:, 8:], obs["proprio"])
    # The cameras stacked along channels (front's RGB, then wrist's), divided by 255.
    planes = torch.cat([obs["rgb_front"], obs["rgb_wrist"]], dim=-1).permute(0, 3, 1, 2).float() / 255.0
    assert encoder.convs is not None and encoder.project is not None
    torch.testing.assert_close(features[:, :8], encoder.project(encoder.convs(planes)))
    # LayerNorm then tanh: bounded features, whatever the scale of the pixels.
    assert features[:, :8].abs().max() < 1.0


def test_image_features_depend_on_each_camera() -> None:
    encoder = pixel_encoder()
    obs = observation()
    for key in ("rgb_front", "rgb_wrist"):
        changed = dict(obs, **{key: 255 - obs[key]})
        assert not torch.allclose(encoder(changed)[:, :8], encoder(obs)[:, :8])


def test_vector_keys_only_have_no_weights_and_keep_their_order() -> None:
    encoder = SACObsEncoder(["privileged", "proprio"], space())
    assert list(encoder.parameters()) == [] and encoder.state_dict() == {}
    obs = observation()
    assert torch.equal(encoder(obs), torch.cat([obs["privileged"], obs["proprio"]], dim=-1))


def test_convolutions_that_leave_no_pixel_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="leave no pixel of 16x16 images"):
        SACObsEncoder(["rgb_front"], space(), [8, 8, 8], [[8, 4], [4, 2], [3, 1]], 8)
    with pytest.raises(ValueError, match="cnn_kernel_stride needs one"):
        SACObsEncoder(["rgb_front"], space(), [8, 8], [[3, 2]], 8)


def test_state_policy_checkpoint_keys_are_the_actor_and_critics_only() -> None:
    policy = SACPolicy(["proprio", "privileged"], space(), 2, [16, 16])
    assert {key.split(".")[0] for key in policy.state_dict()} == {"actor", "critic"}
    assert policy.encode_for_algorithm() == policy.encode  # no module: SAC trains nothing more


def test_pixel_policy_samples_actions_and_hands_sac_its_encoder_module() -> None:
    torch.manual_seed(0)
    keys = ["rgb_front", "rgb_wrist", "proprio"]
    policy = SACPolicy(keys, space(), 3, [16, 16], cnn_channels=[4, 6], cnn_kernel_stride=SMALL_CONVS)
    assert policy.encode_for_algorithm() is policy.encoder
    assert any(key.startswith("encoder.convs.") for key in policy.state_dict())
    actions = policy.sample(observation()).actions
    assert actions.shape == (5, 1, 3) and actions.abs().max() <= 1.0
