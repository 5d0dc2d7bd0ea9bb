"""Warmup + cosine factors against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from vla_rl.algorithms.lr_schedule import warmup_cosine_factor


def test_warmup_then_cosine_to_zero() -> None:
    # 6 steps, warmup 2: (0+1)/2, (1+1)/2, then cos over steps 2..5 (3 intervals): 1, 0.75, 0.25, 0.
    factors = [warmup_cosine_factor(s, 6, 2) for s in range(6)]
    assert factors == pytest.approx([0.5, 1.0, 1.0, 0.75, 0.25, 0.0])


def test_cosine_ends_at_min_ratio_and_stays_there() -> None:
    # No warmup, 5 steps, min 0.2: progress 0.5 at step 2 -> 0.2 + 0.8 * 0.5 = 0.6.
    assert warmup_cosine_factor(0, 5, 0, 0.2) == pytest.approx(1.0)
    assert warmup_cosine_factor(2, 5, 0, 0.2) == pytest.approx(0.6)
    assert warmup_cosine_factor(1, 5, 0, 0.2) == pytest.approx(0.2 + 0.8 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert warmup_cosine_factor(4, 5, 0, 0.2) == pytest.approx(0.2)
    assert warmup_cosine_factor(9, 5, 0, 0.2) == pytest.approx(0.2)


def test_warmup_as_long_as_training_never_decays() -> None:
    assert [warmup_cosine_factor(s, 4, 4) for s in range(4)] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert warmup_cosine_factor(0, 1, 0) == 1.0
