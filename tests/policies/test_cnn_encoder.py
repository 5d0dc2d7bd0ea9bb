"""Options of the convolutional image encoder: coordinate planes and custom kernel/stride layouts."""

import pytest
import torch
from test_policies import OBS_SPACE, random_obs

from vla_rl.policies.cnn import ImageEncoder, build_image_encoder
from vla_rl.policies.config import PolicyConfig
from vla_rl.policies.layers import coordinate_planes


def test_coordinate_planes_by_hand():
    planes = coordinate_planes(3, 5)  # x in {-1, -0.5, 0, 0.5, 1} along columns, y in {-1, 0, 1} down rows
    assert planes.shape == (2, 3, 5)
    torch.testing.assert_close(planes[0, 1], torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0]))
    torch.testing.assert_close(planes[1, :, 3], torch.tensor([-1.0, 0.0, 1.0]))


def test_coord_channels_add_two_input_planes_the_first_convolution_sees():
    torch.manual_seed(0)
    encoder = ImageEncoder(["rgb_front"], OBS_SPACE, [4, 8], 16, "elu", coord_channels=True)
    first = encoder.convs[0]
    assert first.in_channels == 5
    obs = random_obs(2)
    features = encoder(obs)
    # The coordinate planes are input: zeroing their weights changes the features.
    with torch.no_grad():
        first.weight[:, 3:] = 0.0
    assert not torch.allclose(encoder(obs), features)
    assert "coords" not in encoder.state_dict()  # derived from the image size, not saved


def test_kernel_stride_sets_each_convolution_and_keeps_more_resolution():
    # 64 -> (64 - 4) / 2 + 1 = 31 -> (31 - 4) / 2 + 1 = 14 -> 14 - 3 + 1 = 12
    encoder = ImageEncoder(
        ["rgb_front"], OBS_SPACE, [4, 8, 8], 16, "elu", kernel_stride=[[4, 2], [4, 2], [3, 1]]
    )
    convs = [m for m in encoder.convs if isinstance(m, torch.nn.Conv2d)]
    assert [(c.kernel_size[0], c.stride[0]) for c in convs] == [(4, 2), (4, 2), (3, 1)]
    assert encoder.project[0].in_features == 8 * 12 * 12
    default = ImageEncoder(["rgb_front"], OBS_SPACE, [4, 8, 8], 16, "elu")
    # Atari-style: 64 -> 15 -> 6 -> 4
    assert default.project[0].in_features == 8 * 4 * 4
    assert encoder(random_obs(2)).shape == (2, 16)


@pytest.mark.parametrize("kernel_stride", [[[4, 2]], [[4, 2], [4, 0]], [[4], [4, 2]]])
def test_bad_kernel_stride_is_a_clear_error(kernel_stride):
    with pytest.raises(ValueError, match="one \\[kernel, stride\\] pair"):
        ImageEncoder(["rgb_front"], OBS_SPACE, [4, 8], 16, "elu", kernel_stride=kernel_stride)


def test_conv_options_are_refused_by_the_keypoint_encoder():
    with pytest.raises(ValueError, match="options of image_encoder=conv"):
        build_image_encoder(
            PolicyConfig(image_encoder="spatial_softmax", cnn_coord_channels=True), ["rgb_front"], OBS_SPACE
        )
