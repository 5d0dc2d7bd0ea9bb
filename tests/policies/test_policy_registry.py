"""One policy table; the state policies are chunk policies, and the state builder refuses the rest."""

from __future__ import annotations

import pytest

from vla_rl.policies import PolicyConfig, build_policy
from vla_rl.policies.registry import (
    POLICIES,
    chunk_policy_class,
    registered_chunk_policies,
    registered_policies,
)


def test_state_and_chunk_policies_share_one_table() -> None:
    assert sorted(POLICIES) == sorted(registered_policies() + registered_chunk_policies())
    assert registered_chunk_policies() == [
        "chunk_vla",
        "flow_mlp",
        "gaussian",
        "openvla",
        "pi0",
        "pi05",
        "smolvla",
        "token_vla",
    ]


def test_state_policies_are_chunk_policies_and_the_state_builder_refuses_the_rest() -> None:
    assert issubclass(chunk_policy_class("mlp"), chunk_policy_class("gaussian"))
    assert issubclass(chunk_policy_class("cnn"), chunk_policy_class("gaussian"))
    for name in ("gaussian", "flow_mlp"):
        with pytest.raises(ValueError, match=f"'{name}' is not a state policy"):
            build_policy(PolicyConfig(name=name), None, None)  # type: ignore[arg-type]


def test_chunk_policy_classes_carry_their_table_name() -> None:
    for name in ("gaussian", "flow_mlp", "mlp", "cnn"):
        assert chunk_policy_class(name).registry_name == name
