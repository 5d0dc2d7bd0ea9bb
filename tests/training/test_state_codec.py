"""Nested training state survives the tensors + JSON split exactly."""

from __future__ import annotations

import json
import random

import numpy as np
import torch

from vla_rl.training.state_codec import decode_state, encode_state


def test_round_trip_keeps_types_dtypes_and_key_types() -> None:
    state = {
        "optimizer": {
            "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(4, 2)}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0]}],
        },
        "numpy_rng": np.random.RandomState(7).get_state(),
        "python_rng": random.Random(3).getstate(),
        "sim": {"qpos": np.arange(6, dtype=np.float64).reshape(2, 3), "flags": np.array([True, False])},
        "inf": float("inf"),
        "name": "reach",
        "nothing": None,
    }
    tensors, skeleton = encode_state(state)
    restored = decode_state(tensors, json.loads(json.dumps(skeleton)))
    assert list(restored["optimizer"]["state"]) == [0]
    assert torch.equal(
        restored["optimizer"]["state"][0]["exp_avg"], state["optimizer"]["state"][0]["exp_avg"]
    )
    assert restored["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.999)
    name, keys, pos, has_gauss, cached = restored["numpy_rng"]
    assert name == "MT19937" and keys.dtype == np.uint32 and np.array_equal(keys, state["numpy_rng"][1])
    assert (pos, has_gauss, cached) == state["numpy_rng"][2:]
    assert restored["python_rng"] == state["python_rng"]
    assert restored["sim"]["qpos"].dtype == np.float64 and restored["sim"]["qpos"].shape == (2, 3)
    assert np.array_equal(restored["sim"]["qpos"], state["sim"]["qpos"])
    assert restored["sim"]["flags"].tolist() == [True, False]
    assert restored["inf"] == float("inf") and restored["name"] == "reach" and restored["nothing"] is None


def test_tensor_keys_are_dotted_paths() -> None:
    tensors, skeleton = encode_state({"a": {"b": torch.zeros(2)}, "c": [torch.ones(1)]})
    assert sorted(tensors) == ["a.b", "c.0"]
    assert skeleton["a"]["b"] == {"__tensor__": "a.b"}
