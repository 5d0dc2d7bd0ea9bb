import torch

from vla_rl.envs.batching import obs_to_device, select_worlds


def observation() -> dict:
    return {"proprio": torch.arange(8.0).view(4, 2), "instruction": ["a", "b", "c", "d"]}


def test_select_worlds_by_index_picks_tensor_rows_and_list_items_in_that_order():
    picked = select_worlds(observation(), torch.tensor([3, 1]))
    assert picked["proprio"].tolist() == [[6.0, 7.0], [2.0, 3.0]]
    assert picked["instruction"] == ["d", "b"]


def test_select_worlds_by_slice_takes_a_stage_of_consecutive_worlds():
    picked = select_worlds(observation(), slice(1, 3))
    assert picked["proprio"].tolist() == [[2.0, 3.0], [4.0, 5.0]]
    assert picked["instruction"] == ["b", "c"]


def test_obs_to_device_moves_tensors_and_keeps_the_instructions():
    moved = obs_to_device(observation(), "meta")
    assert moved["proprio"].device.type == "meta" and moved["instruction"] == ["a", "b", "c", "d"]
