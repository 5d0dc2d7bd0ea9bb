import torch

from vla_rl.rollout.flat_batch import concat_zero_padded


def test_concat_zero_padded_pads_later_dims_at_their_end():
    first = torch.tensor([[1, 2, 3]])
    second = torch.tensor([[4, 5], [6, 7]])
    assert concat_zero_padded([first, second]).tolist() == [[1, 2, 3], [4, 5, 0], [6, 7, 0]]
    keys = concat_zero_padded([torch.ones(1, 2, 1, 3), torch.ones(2, 2, 1, 1)])
    assert keys.shape == (3, 2, 1, 3)
    assert keys[1:, :, :, 1:].abs().sum() == 0 and keys[1:, :, :, :1].sum() == 4
