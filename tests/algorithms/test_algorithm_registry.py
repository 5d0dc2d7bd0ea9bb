"""One algorithm table for the state, chunk, supervised and off-policy learners; each builder refuses
the other family."""

from __future__ import annotations

import pytest

from vla_rl.algorithms import PPOConfig, build_algorithm
from vla_rl.algorithms.registry import ALGORITHMS, build_chunk_algorithm, registered_chunk_algorithms


def test_one_table_holds_both_families() -> None:
    assert sorted(ALGORITHMS) == ["ppo", "sac", "sft", "vla_grpo", "vla_ppo"]
    assert registered_chunk_algorithms() == ["vla_grpo", "vla_ppo"]


def test_each_builder_names_the_other_family() -> None:
    with pytest.raises(ValueError, match="'vla_ppo' trains chunk policies"):
        build_algorithm(PPOConfig(name="vla_ppo"), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'ppo' trains state policies"):
        build_chunk_algorithm(PPOConfig(name="ppo"), None)  # type: ignore[arg-type]
