"""OpenVLA's action tokens: bins, token order, un-normalisation, against numbers worked out by hand.

256 edges over [-1, 1] are 2/255 apart, so centre i is -1 + (2 i + 1) / 255; the tokenizer has
V = 32000 ids, the action ids are 31744..31999 and bin k is id 31744 + k, i.e. V - token = 256 - k.
"""

import numpy as np
import pytest
import torch

from vla_rl.policies.openvla_folder import ActionStats
from vla_rl.policies.vla.openvla_actions import OpenVLAActionCodec

STATS = ActionStats(
    q01=np.array([-0.02, -0.5, 0.0]),
    q99=np.array([0.03, 1.5, 1.0]),
    mask=np.array([True, True, False]),
)


@pytest.fixture
def codec() -> OpenVLAActionCodec:
    return OpenVLAActionCodec(token_vocab_size=32000, n_bins=256, stats=STATS)


def test_action_ids_are_the_last_256_of_the_tokenizer(codec: OpenVLAActionCodec) -> None:
    assert codec.first_token_id == 31744
    assert codec.bins_to_token_ids(torch.tensor([0, 255])).tolist() == [31744, 31999]


def test_bins_decode_to_reversed_centres(codec: OpenVLAActionCodec) -> None:
    bins = torch.tensor([255, 128, 1, 0])  # tokens 31999, 31872, 31745, 31744
    expected = [-1 + 1 / 255, 0.0, -1 + 509 / 255, -1 + 509 / 255]  # the two lowest ids share the top
    assert codec.bins_to_normalised(bins).tolist() == pytest.approx(expected, abs=1e-12)


def test_unnormalise_uses_q01_q99_where_masked(codec: OpenVLAActionCodec) -> None:
    normalised = torch.tensor([[0.0, 0.0, 0.0], [1.0, -1.0, 0.5]])
    # 0.5 (a + 1)(q99 - q01) + q01: dim 0 -> 0.005 at 0, 0.03 at 1; dim 1 -> 0.5 at 0, -0.5 at -1;
    # dim 2 is not masked: a itself
    expected = [[0.005, 0.5, 0.0], [0.03, -0.5, 0.5]]
    assert codec.unnormalise(normalised).flatten().tolist() == pytest.approx(sum(expected, []), abs=1e-12)


def test_bins_to_actions_by_hand(codec: OpenVLAActionCodec) -> None:
    bins = torch.tensor([[128, 255, 0]])
    # dim 0: centre 0 -> 0.005; dim 1: centre -1 + 1/255 -> 0.5 (1/255) 2 - 0.5; dim 2: top centre, unmasked
    expected = [[0.005, 1 / 255 - 0.5, -1 + 509 / 255]]
    actions = codec.bins_to_actions(bins)
    assert actions.dtype == torch.float32
    assert actions.flatten().tolist() == pytest.approx(sum(expected, []), abs=1e-6)


def test_actions_to_bins_is_openvlas_digitize(codec: OpenVLAActionCodec) -> None:
    # dim 0: 0.005 -> normalised 0: edges <= 0 are 0..127 (128 of them) -> V - 128 -> bin 128;
    # dim 1: 2.0 is above q99 -> clipped to 1 -> all 256 edges -> bin 0;
    # dim 2 (unmasked): -1 -> only edge 0 -> bin 255
    bins = codec.actions_to_bins(torch.tensor([[0.005, 2.0, -1.0]]))
    assert bins.tolist() == [[128, 0, 255]]
    # back: centre 0 -> 0.005; top centre -1 + 509/255 -> 0.5 (509/255) 2 - 0.5; unmasked centre 0
    expected = [0.005, 509 / 255 - 0.5, -1 + 1 / 255]
    assert codec.bins_to_actions(bins).flatten().tolist() == pytest.approx(expected, abs=1e-6)


def test_round_trip_within_half_a_bin(codec: OpenVLAActionCodec) -> None:
    actions = torch.tensor([[0.01, 0.3, 0.2], [-0.015, 1.2, -0.7]])
    back = codec.bins_to_actions(codec.actions_to_bins(actions))
    half_bin = (
        torch.tensor([0.05, 2.0, 1.0]) / 255
    )  # half of 2/255 normalised: (q99 - q01) / 255; 1/255 unmasked
    assert bool(((back - actions).abs() <= half_bin + 1e-6).all())
