"""The pieces of SmolVLA's network against numbers worked out by hand (the whole network is checked
against LeRobot in tests/lerobot/test_smolvla_parity.py)."""

from __future__ import annotations

import math

import torch

from vla_rl.policies.flow.smolvla_layers import attend, expert_reads_prefix_width, layer_plan, rotate
from vla_rl.policies.flow.smolvla_model import (
    block_attention,
    denoising_times,
    expert_intermediate_size,
    time_embedding,
)


def test_expert_mlp_width_is_two_thirds_of_four_times_rounded_up_to_256() -> None:
    assert expert_intermediate_size(720) == 2048  # SmolVLM2-500M's 960 x 0.75: 4 * 480 = 1920 -> 2048
    assert expert_intermediate_size(48) == 256  # 4 * 32 = 128 -> 256
    assert expert_intermediate_size(384) == 1024  # 4 * 256 = 1024 stays


def test_layer_plan_pairs_and_interleaves() -> None:
    plans = layer_plan(4, 4, "cross_attn", 2)
    assert [(p.expert_index, p.joint) for p in plans] == [(0, True), (1, False), (2, True), (3, False)]
    skipping = layer_plan(4, 2, "cross_attn", -1)
    assert [(p.expert_index, p.joint) for p in skipping] == [
        (0, False),
        (None, False),
        (1, False),
        (None, False),
    ]
    assert all(p.joint for p in layer_plan(3, 3, "self_attn", 2))
    assert [expert_reads_prefix_width(i, "cross_attn", 2) for i in range(4)] == [False, True, False, True]
    assert not expert_reads_prefix_width(1, "self_attn", 2)


def test_rotation_turns_the_two_halves_of_a_head() -> None:
    x = torch.tensor([1.0, 0.0, 0.0, 2.0]).reshape(1, 1, 1, 4)
    torch.testing.assert_close(rotate(x, torch.zeros(1, 1)), x)
    # head width 4: pair (0, 2) turns by position / 10000^0, pair (1, 3) by position / 10000^0.5
    out = rotate(x, torch.full((1, 1), 3.0)).flatten()
    a, b = 3.0, 3.0 / 100.0
    want = torch.tensor([math.cos(a), -2.0 * math.sin(b), math.sin(a), 2.0 * math.cos(b)])
    torch.testing.assert_close(out, want)


def test_attention_masks_and_shares_key_heads() -> None:
    queries = torch.randn(1, 2, 4, 3)  # 4 query heads
    keys = torch.randn(1, 3, 2, 3)  # 2 key/value heads: heads 0, 1 read kv head 0; 2, 3 read kv head 1
    values = torch.arange(18.0).reshape(1, 3, 2, 3)
    allowed = torch.tensor([[[True, False, False], [False, False, True]]])
    out = attend(queries, keys, values, allowed).reshape(1, 2, 4, 3)
    torch.testing.assert_close(out[0, 0], values[0, 0].repeat_interleave(2, 0))  # only key 0
    torch.testing.assert_close(out[0, 1], values[0, 2].repeat_interleave(2, 0))  # only key 2


def test_block_attention_state_token_sees_all_and_padding_nothing() -> None:
    valid = torch.tensor([[True, True, False, True]])
    starts = torch.tensor([False, False, False, True])  # tokens 0-2 one block, token 3 (state) the next
    want = torch.tensor(
        [
            [True, True, False, False],
            [True, True, False, False],
            [False, False, False, False],
            [True, True, False, True],
        ]
    )
    torch.testing.assert_close(block_attention(valid, starts)[0], want)


def test_time_embedding_sines_then_cosines_of_geometric_periods() -> None:
    # width 4: periods 1 and 4; t = 0.25 -> angles pi / 2 and pi / 8
    out = time_embedding(torch.tensor([0.0, 0.25]), 4, min_period=1.0, max_period=4.0)
    torch.testing.assert_close(out[0], torch.tensor([0.0, 0.0, 1.0, 1.0]))
    want = torch.tensor([1.0, math.sin(math.pi / 8), 0.0, math.cos(math.pi / 8)])
    torch.testing.assert_close(out[1], want)


def test_denoising_times_are_a_float32_running_sum() -> None:
    times = denoising_times(5)
    assert times.dtype == torch.float32 and len(times) == 6 and times[0] == 1.0
    step = torch.tensor(-0.2, dtype=torch.float32)
    assert times[3] == (torch.tensor(1.0) + step + step + step)
    assert abs(float(times[-1])) < 1e-6
