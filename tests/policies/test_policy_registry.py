"""One policy table for state and chunk policies; each builder refuses the other family."""

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
    assert registered_chunk_policies() == ["chunk_vla", "flow_mlp", "gaussian", "pi0", "token_vla"]


def test_each_builder_names_the_other_family() -> None:
    with pytest.raises(ValueError, match="'mlp' is not a chunk policy"):
        chunk_policy_class("mlp")
    with pytest.raises(ValueError, match="'gaussian' is not a state policy"):
        build_policy(PolicyConfig(name="gaussian"), None, None)  # type: ignore[arg-type]


def test_chunk_policy_classes_carry_their_table_name() -> None:
    for name in ("gaussian", "flow_mlp"):
        assert chunk_policy_class(name).registry_name == name
