"""The maps between an env and an imported checkpoint (``vla_rl.policies.env_maps``): their maths on
vectors worked out by hand, and how they are merged, saved and read."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from vla_rl.config import ConfigError
from vla_rl.policies.env_maps import DimensionMap, EnvInterface, EnvMaps


def test_apply_copies_the_named_dimensions_and_fills_the_null_ones() -> None:
    giving = torch.tensor([[10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]])
    mapped = DimensionMap(index=[0, 1, 2, 6]).apply(giving)
    torch.testing.assert_close(mapped, torch.tensor([[10.0, 11.0, 12.0, 16.0]]))
    mapped = DimensionMap(index=[3, None, 3], fill=-1.5).apply(giving)
    torch.testing.assert_close(mapped, torch.tensor([[13.0, -1.5, 13.0]]))


def test_no_map_leaves_the_vector_alone() -> None:
    giving = torch.arange(6.0).reshape(2, 3)
    assert DimensionMap().apply(giving) is giving
    assert DimensionMap().width(3) == 3 and DimensionMap(index=[0]).width(3) == 1


def test_scatter_puts_receiving_values_back_and_marks_the_taken_dimensions() -> None:
    env_actions = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])  # [N, chunk, 4]
    robot, taken = DimensionMap(index=[0, 1, 2, 6]).scatter(env_actions, 7)
    torch.testing.assert_close(robot, torch.tensor([[[1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 4.0]]]))
    assert taken.tolist() == [True, True, True, False, False, False, True]
    # a null entry gives nothing back; a dimension taken twice keeps the later value
    robot, taken = DimensionMap(index=[None, 1, 1]).scatter(torch.tensor([[5.0, 6.0, 7.0]]), 2)
    torch.testing.assert_close(robot, torch.tensor([[0.0, 7.0]]))
    assert taken.tolist() == [False, True]


def test_check_range_names_every_entry_outside_the_giving_vector() -> None:
    DimensionMap(index=[0, None, 6]).check_range("policy.action_map", 7, "the checkpoint's action")
    with pytest.raises(ConfigError, match=r"'policy.action_map.index': entry 1 is 7, entry 2 is -1.*0..6"):
        DimensionMap(index=[0, 7, -1]).check_range("policy.action_map", 7, "the checkpoint's action")


def test_given_maps_replace_the_saved_ones_and_the_rest_are_kept() -> None:
    saved = EnvMaps(action_map={"index": [0, 1, 2, 6]}, camera_map={"front": "top"})
    given = EnvMaps(state_map={"index": [1, 0]})
    combined = given.over(saved)
    assert combined.action_map.index == [0, 1, 2, 6]
    assert combined.state_map.index == [1, 0]
    assert combined.camera_map == {"front": "top"}
    assert given.given() == ["policy.state_map"]
    assert EnvMaps().given() == []


def test_maps_read_back_from_their_saved_dict() -> None:
    from dataclasses import asdict

    maps = EnvMaps(action_map={"index": [0, None], "fill": 0.5}, camera_map={"wrist": None})
    assert EnvMaps(**asdict(maps)) == maps


def test_env_interface_of_spaces_and_of_an_observation() -> None:
    space = gym.spaces.Dict(
        {
            "proprio": gym.spaces.Box(-1, 1, (24,)),
            "rgb_front": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8),
        }
    )
    env = EnvInterface.of_spaces(space, gym.spaces.Box(-1, 1, (4,)))
    assert (env.action_dim, env.vector_dims, env.cameras) == (4, {"proprio": 24}, ["front"])
    obs = {"proprio": torch.zeros(1, 24), "rgb_wrist": torch.zeros(1, 8, 8, 3), "instruction": ["x"]}
    demos = EnvInterface.of_observation(obs, 7, "the demonstrations")
    assert (demos.action_dim, demos.vector_dims, demos.cameras) == (7, {"proprio": 24}, ["wrist"])
