import pytest
import torch

from vla_rl.policies.chunk_policy import proprio_columns, state_vector
from vla_rl.policies.vla.config import TokenVLAConfig


def test_proprio_fields_keep_the_named_columns_in_layout_order():
    # Layout: arm_qpos 0-6, arm_qvel 7-13, gripper_opening_m 14, tcp_pos 15-17, tcp_rot6 18-23.
    assert proprio_columns(["tcp_pos", "gripper_opening_m"]) == [14, 15, 16, 17]
    proprio = torch.arange(48.0).reshape(2, 24)
    obs = {"proprio": proprio, "objects": torch.tensor([[100.0], [200.0]])}
    state = state_vector(obs, ["proprio", "objects"], torch.device("cpu"), ["arm_qpos", "tcp_pos"])
    assert state[0].tolist() == [0, 1, 2, 3, 4, 5, 6, 15, 16, 17, 100]
    assert state[1].tolist() == [24, 25, 26, 27, 28, 29, 30, 39, 40, 41, 200]
    full = state_vector(obs, ["proprio"], torch.device("cpu"))
    torch.testing.assert_close(full, proprio)


def test_unknown_proprio_field_is_a_clear_error_at_config_time():
    with pytest.raises(ValueError, match="unknown proprio fields \\['arm_qacc'\\]"):
        TokenVLAConfig(use_proprio=True, proprio_dim=7, proprio_fields=["arm_qpos", "arm_qacc"])
