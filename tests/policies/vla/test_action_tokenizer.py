import pytest
import torch

from vla_rl.policies.vla.action_tokenizer import ActionTokenizer


def test_hand_worked_bins_and_centres():
    # dim 0: [-1, 1], dim 1: [0, 2]; 4 bins of width 0.5 in normalised units.
    tokenizer = ActionTokenizer(vocab_size=10, low=[-1.0, 0.0], high=[1.0, 2.0], num_bins=4)
    actions = torch.tensor([[0.1, 0.1], [-1.0, 2.0], [0.99, 1.6]])
    # normalised: [0.1, -0.9], [-1, 1], [0.99, 0.6] -> bins floor((x + 1) / 0.5), clamped to 3
    expected_bins = torch.tensor([[2, 0], [0, 3], [3, 3]])
    assert torch.equal(tokenizer.actions_to_bins(actions), expected_bins)
    assert torch.equal(tokenizer.encode(actions), expected_bins + 6)  # last 4 of 10 ids
    # centres -0.75, -0.25, 0.25, 0.75 -> dim 1 un-normalised: 0.25, 0.75, 1.25, 1.75
    decoded = tokenizer.decode(expected_bins + 6)
    assert torch.allclose(decoded, torch.tensor([[0.25, 0.25], [-0.75, 1.75], [0.75, 1.75]]))


def test_round_trip_within_half_a_bin_and_ids_reserved():
    torch.manual_seed(0)
    low, high = torch.tensor([-1.0, -0.5, 0.0, -2.0]), torch.tensor([1.0, 0.5, 0.3, 2.0])
    tokenizer = ActionTokenizer(vocab_size=1000, low=low, high=high)
    actions = low + torch.rand(5000, 4) * (high - low)
    ids = tokenizer.encode(actions)
    assert int(ids.min()) >= 1000 - 256 and int(ids.max()) <= 999
    half_bin = (high - low) / (2 * 256)
    error = (tokenizer.decode(ids) - actions).abs()
    assert bool((error <= half_bin + 1e-6).all())
    assert bool((error.max(dim=0).values > 0.9 * half_bin).all())  # the bound is tight


def test_out_of_range_actions_clip_to_edge_bins():
    tokenizer = ActionTokenizer(vocab_size=300, low=[-0.5], high=[0.5])
    bins = tokenizer.actions_to_bins(torch.tensor([[-3.0], [3.0]]))
    assert bins.flatten().tolist() == [0, 255]


def test_decode_rejects_text_tokens():
    tokenizer = ActionTokenizer(vocab_size=300, low=[-1.0], high=[1.0])
    with pytest.raises(ValueError):
        tokenizer.decode(torch.tensor([[10]]))


def test_stats_json_round_trip(tmp_path):
    tokenizer = ActionTokenizer.from_quantiles(
        torch.linspace(-1, 1, 201)[:, None].repeat(1, 2), vocab_size=400
    )
    assert torch.allclose(tokenizer.low, torch.tensor([-0.98, -0.98]), atol=1e-5)
    assert torch.allclose(tokenizer.high, torch.tensor([0.98, 0.98]), atol=1e-5)
    tokenizer.save(tmp_path)
    loaded = ActionTokenizer.load(tmp_path)
    assert loaded.to_dict() == tokenizer.to_dict()
