"""The GPU benchmark's code at test size on the CPU (the full-size figures need a GPU: make bench-gpu)."""

from __future__ import annotations

import json
import sys

from benchmarks import pi0_gpu_update


def test_tiny_run_times_each_setting_and_lora_trains_fewer_weights(tmp_path, monkeypatch):
    results = tmp_path / "pi0_gpu_update.json"
    argv = ["x", "--tiny", "--device", "cpu", "--updates", "1", "--batches", "2", "--image-size", "32"]
    precisions = ["--precisions", "bf16_weights", "autocast"]
    monkeypatch.setattr(sys, "argv", [*argv, *precisions, "--results", str(results)])
    pi0_gpu_update.main()
    rows = {(row["precision"], row["mode"]): row for row in json.loads(results.read_text())["rows"]}
    assert set(rows) == {(p, m) for p in ("bf16_weights", "autocast") for m in ("lora", "full")}
    assert all(row["gradient_steps"] == 1 and row["seconds_per_update"] > 0 for row in rows.values())
    for precision in ("bf16_weights", "autocast"):
        assert 0 < rows[precision, "lora"]["trainable"] < rows[precision, "full"]["trainable"]
