"""The robot-side action queue: merging overlapping chunks and fetching them in the background."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from vla_rl.real_world.action_queue import MERGE_MODES, ActionQueue, AsyncChunker
from vla_rl.real_world.policy_client import ChunkReply

CHUNK = 4
TOKEN = "s3cret-token"


def chunk(base: float, marker: float, n: int = 4) -> np.ndarray:
    """Rows [base + i, marker]: the first column tells which row, the second which chunk."""
    return np.array([[base + i, marker] for i in range(n)], dtype=np.float32)


def test_latest_merge_and_remaining():
    q = ActionQueue(merge="latest")
    assert q.pop(0) is None and q.remaining(0) == 0
    q.put(chunk(10, 0), start_step=0)  # steps 0..3
    assert q.remaining(0) == 3 and q.remaining(3) == 0
    np.testing.assert_array_equal(q.pop(0), [10, 0])
    np.testing.assert_array_equal(q.pop(1), [11, 0])
    q.put(chunk(20, 1), start_step=2)  # steps 2..5, newer than the first
    assert q.remaining(2) == 3
    np.testing.assert_array_equal(q.pop(2), [20, 1])  # switched to the newest plan
    np.testing.assert_array_equal(q.pop(3), [21, 1])
    np.testing.assert_array_equal(q.pop(5), [23, 1])
    assert q.pop(6) is None and len(q) == 0


def test_latest_means_latest_start_step_not_arrival_order():
    q = ActionQueue(merge="latest")
    q.put(chunk(20, 1), start_step=2)
    q.put(chunk(10, 0), start_step=0)  # a stale plan arriving late does not take over
    np.testing.assert_array_equal(q.pop(1), [11, 0])
    np.testing.assert_array_equal(q.pop(2), [20, 1])


def test_ensemble_merge_by_hand():
    # decay = ln 3 so the weights are 1, 1/3, 1/9 from the OLDEST covering chunk on.
    q = ActionQueue(merge="ensemble", ensemble_decay=math.log(3.0))
    q.put(chunk(10, 0), start_step=0)  # A: steps 0..3
    q.put(chunk(20, 1), start_step=2)  # B: steps 2..5
    np.testing.assert_allclose(q.pop(1), [11, 0])  # only A
    # step 2: A2 = [12, 0] (w 3/4), B0 = [20, 1] (w 1/4) -> [9 + 5, 0.25]
    np.testing.assert_allclose(q.pop(2), [14.0, 0.25], rtol=1e-6)
    q.put(chunk(30, 2), start_step=3)  # C: steps 3..6
    # step 3: A3 = 13, B1 = 21, C0 = 30 with weights 9/13, 3/13, 1/13 -> 210/13; marker 5/13
    np.testing.assert_allclose(q.pop(3), [210 / 13, 5 / 13], rtol=1e-6)
    # step 4 (A is used up): B2 = 22 (w 3/4), C1 = 31 (w 1/4) -> 16.5 + 7.75 = 24.25; marker 1.25
    np.testing.assert_allclose(q.pop(4), [24.25, 1.25], rtol=1e-6)
    uniform = ActionQueue(merge="ensemble", ensemble_decay=0.0)
    uniform.put(chunk(10, 0), 0)
    uniform.put(chunk(20, 1), 2)
    np.testing.assert_allclose(uniform.pop(2), [16.0, 0.5])
    assert set(MERGE_MODES) == {"latest", "ensemble"}
    with pytest.raises(ValueError, match="unknown merge mode"):
        ActionQueue(merge="median")


def test_start_step_alignment_and_validation():
    q = ActionQueue()
    q.put(chunk(50, 0), start_step=5)  # row i applies at step 5 + i
    assert q.pop(4) is None
    np.testing.assert_array_equal(q.pop(7), [52, 0])  # rows for steps 5, 6 are skipped
    assert q.remaining(7) == 1
    with pytest.raises(ValueError):
        q.put(np.zeros((3, 5)), start_step=8)  # action_dim changed
    with pytest.raises(ValueError):
        q.put(np.zeros(3), start_step=8)


def test_async_chunker_skips_the_part_of_the_chunk_already_in_the_past():
    release = threading.Event()
    calls = []

    def slow_infer(observation):
        s = int(observation["step"])
        calls.append(s)
        release.wait(5.0)
        return ChunkReply(np.arange(s, s + 8, dtype=np.float32)[:, None], len(calls), None, 0.0, 0.0, 0.0)

    q = ActionQueue()
    with AsyncChunker(slow_infer, q, refill_threshold=3) as chunker:
        obs = {"step": np.array(0)}
        assert chunker.observe(obs, 0)
        obs["step"][...] = 99  # the chunker took a snapshot: the robot may reuse its buffers
        for step in range(1, 4):  # the robot holds while the first reply is late
            assert not chunker.observe({"step": step}, step) and not chunker.request({"step": step}, step)
            assert q.pop(step) is None
        release.set()
        assert chunker.wait_idle(5.0) and calls == [0]
        np.testing.assert_array_equal(q.pop(4), [4.0])  # rows 0..3 were in the past
        for step in range(5, 40):  # refills keep the queue from running dry
            chunker.observe({"step": step}, step)
            chunker.wait_idle(5.0)
            np.testing.assert_array_equal(q.pop(step), [float(step)])
            assert q.remaining(step) >= 3
        assert chunker.failures == 0 and chunker.successes == len(calls) > 1
