"""A LeRobot pi0 / pi0.5 import acting through ``policy.action_map`` / ``state_map`` / ``camera_map``:
against the LeRobot reference outputs of the fixtures, the maps move exactly the dimensions and
cameras they name, and they are saved with the policy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vla_rl.policies.env_maps import EnvMaps
from vla_rl.policies.flow.pi0 import Pi0Policy
from vla_rl.policies.flow.pi05 import Pi05Policy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "lerobot"
FAMILIES = {"pi0": Pi0Policy, "pi05": Pi05Policy}
TOLERANCE = 1e-4
"""float32 parity with the reference (the issue's bound)."""
ACTION_INDEX = [0, 1, 2, 6]
"""A 4-dim env action from the reference's 7: xyz and the last (gripper)."""


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def policy_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def reference(policy_type: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / policy_type / "reference.npz") as arrays:
        return dict(arrays)


def imported(policy_type: str, maps: EnvMaps) -> Pi0Policy:
    fixture = FIXTURES / policy_type
    policy = FAMILIES[policy_type].from_pretrained(
        str(fixture / "policy"), tokenizer_dir=str(fixture / "tokenizer")
    )
    policy.set_env_maps(maps)
    return policy.eval()


def observation(reference: dict[str, np.ndarray], cameras: tuple[str, str] = ("front", "wrist")) -> dict:
    return {
        f"rgb_{cameras[0]}": reference["rgb_front"],
        f"rgb_{cameras[1]}": reference["rgb_wrist"],
        "proprio": torch.as_tensor(reference["state"]),
        "instruction": [str(text) for text in reference["instructions"]],
    }


def max_difference(actions: torch.Tensor, expected: np.ndarray) -> float:
    assert actions.shape == expected.shape
    return float(np.abs(actions.numpy() - expected).max())


def test_action_map_gives_the_reference_dimensions_it_names(
    policy_type: str, reference: dict[str, np.ndarray]
) -> None:
    policy = imported(policy_type, EnvMaps(action_map={"index": [*ACTION_INDEX[:3], None, 6], "fill": 0.25}))
    actions = policy.predict_action_chunk(observation(reference), torch.as_tensor(reference["noise"]))
    assert max_difference(actions[..., [0, 1, 2, 4]], reference["actions"][..., ACTION_INDEX]) < TOLERANCE
    assert (actions[..., 3] == 0.25).all()
    assert policy.action_dim == 5
    assert policy.action_dim_mask.nonzero().flatten().tolist() == ACTION_INDEX


def test_state_and_camera_maps_rebuild_the_reference_inputs(
    policy_type: str, reference: dict[str, np.ndarray]
) -> None:
    """An env whose state holds the reference's 8 values reversed after 3 others, and whose cameras
    are named ``top`` and ``hand``: the maps undo both and the actions are the reference's."""
    maps = EnvMaps(state_map={"index": list(range(10, 2, -1))}, camera_map={"front": "top", "wrist": "hand"})
    policy = imported(policy_type, maps)
    obs = observation(reference, ("top", "hand"))
    state = torch.as_tensor(reference["state"])
    obs["proprio"] = torch.cat([torch.full((len(state), 3), 9.0), state.flip(-1)], dim=-1)
    actions = policy.predict_action_chunk(obs, torch.as_tensor(reference["noise"]))
    assert max_difference(actions, reference["actions"]) < TOLERANCE


def test_a_state_map_fill_reaches_the_model_normalised(
    policy_type: str, reference: dict[str, np.ndarray]
) -> None:
    """A null entry holds ``fill`` in the checkpoint's raw units: the model sees it normalised."""
    maps = EnvMaps(state_map={"index": [0, 1, 2, 3, 4, 5, 6, None], "fill": 0.5})
    policy = imported(policy_type, maps)
    expected = imported(policy_type, EnvMaps())
    state = torch.as_tensor(reference["state"])
    obs = observation(reference)
    full = {**obs, "proprio": torch.cat([state[:, :7], torch.full((len(state), 1), 0.5)], dim=-1)}
    torch.testing.assert_close(
        policy.prepare_inputs({**obs, "proprio": state[:, :7]}).state, expected.prepare_inputs(full).state
    )


def test_demonstrated_actions_go_back_through_the_action_map(policy_type: str) -> None:
    """SFT's direction: env actions -> the checkpoint's dimensions they came from (normalised), the
    others 0 and outside the loss's mask."""
    policy = imported(policy_type, EnvMaps(action_map={"index": ACTION_INDEX}))
    unmapped = imported(policy_type, EnvMaps())
    env_actions = torch.randn(2, policy.chunk_len, 4)
    robot = torch.zeros(2, policy.chunk_len, 7)
    robot[..., ACTION_INDEX] = env_actions
    model = policy.to_model_actions(env_actions)
    torch.testing.assert_close(model[..., ACTION_INDEX], unmapped.to_model_actions(robot)[..., ACTION_INDEX])
    assert not model[..., [3, 4, 5]].any() and not model[..., 7:].any()


def test_maps_are_saved_with_the_policy(
    policy_type: str, reference: dict[str, np.ndarray], tmp_path: Path
) -> None:
    maps = EnvMaps(action_map={"index": ACTION_INDEX}, camera_map={"front": "top"})
    policy = imported(policy_type, maps)
    policy.save_pretrained(str(tmp_path / "saved"))
    reloaded = FAMILIES[policy_type].from_pretrained(str(tmp_path / "saved")).eval()
    assert reloaded.cfg.lerobot is not None and reloaded.cfg.lerobot.maps == maps
    assert reloaded.action_dim == 4
    obs, noise = observation(reference, ("top", "wrist")), torch.as_tensor(reference["noise"])
    torch.testing.assert_close(
        reloaded.predict_action_chunk(obs, noise), policy.predict_action_chunk(obs, noise)
    )
    # maps given later replace the saved ones one by one
    reloaded.set_env_maps(EnvMaps(action_map={"index": [6]}))
    assert reloaded.cfg.lerobot.maps.action_map.index == [6]
    assert reloaded.cfg.lerobot.maps.camera_map == {"front": "top"}
    assert reloaded.action_dim == 1
