"""RLPD from pixels: the quick run goes through collect and train end to end; the table's numbers by hand."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import rlpd_pixels


def test_quick_run_collects_camera_demos_trains_from_pixels_and_writes_its_curve(tmp_path: Path) -> None:
    rlpd_pixels.main(["--quick", "--work-dir", str(tmp_path)])  # about 15 s on 2 cores
    results = json.loads((tmp_path / "rlpd_pixels_quick.json").read_text())
    assert [steps for steps, _ in results["curve"]] == [48, 96]
    assert all(0.0 <= success <= 1.0 for _, success in results["curve"])
    assert "observations=pixels" in results["command"] and "env.image_size=16" in results["command"]
    assert "env.image_size=64" not in results["command"]
    table = (tmp_path / "rlpd_pixels_quick.md").read_text()
    assert "| 48 |" in table and "| 96 |" in table
    log = (tmp_path / "train.log").read_text()
    assert "2 critic steps per 4 env steps, 38 demonstration transitions" in log  # 2 x (20 - 1)


def test_steps_to_target_and_the_table_by_hand() -> None:
    curve = [(10_000, 0.25), (20_000, 0.8125), (30_000, 0.75)]
    assert rlpd_pixels.steps_to(curve, 0.8) == 20_000
    assert rlpd_pixels.steps_to(curve, 0.9) is None
    results = {
        "machine": "m",
        "device": "cuda",
        "demos": 20,
        "env_steps": 30_000,
        "wall_s": 5_400.0,
        "curve": [list(point) for point in curve],
    }
    table = rlpd_pixels.summarise(results)
    assert "(20 demonstrations, 30,000 env steps, 1.5 h): env steps to 80 %: 20,000." in table
    assert "| 20,000 | 81.2 % |" in table


def test_later_overrides_replace_earlier_ones_of_the_same_key() -> None:
    merged = rlpd_pixels.overridden(["a=1", "b=2", "c=3"], ("b=5", "d=4"))
    assert merged == ["a=1", "c=3", "b=5", "d=4"]


def test_cost_note_turns_the_rate_into_hours_for_100k_env_steps() -> None:
    cost = {
        "machine": "m",
        "device": "cpu",
        "torch_threads": 1,
        "overrides": ["algorithm=rlpd"],
        "batch_size": 256,
        "critic_steps_per_update": 16,
        "env_steps_per_update": 4,
        "update_s": [10.0],
        "seconds_per_update": 10.0,
        "load_average_1min": 1.0,
        "random_env_steps_per_s": 200.0,
        "batch_s": [0.5],
        "seconds_per_batch": 0.5,
        "training_env_steps_per_s": 0.4,  # 4 env steps per 10 s
    }
    # 100,000 / 0.4 = 250,000 s = 69.4 h = 2.9 days
    assert "| 100,000 env steps would take | 69 h (2.9 days) |" in rlpd_pixels.cost_note(cost)
