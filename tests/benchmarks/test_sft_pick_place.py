from pathlib import Path

from benchmarks.common import RESULTS_DIR, results_files
from benchmarks.sft_pick_place import Stage, build_parser, keep_training_times, stage_dir


def test_later_stages_are_named_by_their_total_steps():
    stages = (Stage(56000), Stage(32000, 1.5e-4))
    root = Path("runs")
    assert stage_dir(root, "chunk_vla", 0, stages, 0) == root / "chunk_vla_full"
    assert stage_dir(root, "chunk_vla", 0, stages, 1) == root / "chunk_vla_full_88k"
    assert stage_dir(root, "pi0", 200, (Stage(16000),), 0) == root / "pi0_200"


def test_stages_trained_earlier_keep_their_recorded_times():
    # Stage 1 trained in an earlier invocation (126.5 min, 2 jobs); stage 2 trained now in 60.0 min.
    earlier = {"run_dir": "runs/a_full", "trained": True, "wall_min": 126.5, "threads": 1, "jobs": 2}
    previous = {"stages": [earlier]}
    row = {
        "stages": [
            {"run_dir": "runs/a_full", "trained": False, "wall_min": 0.0},
            {"run_dir": "runs/a_full_88k", "trained": True, "wall_min": 60.0, "threads": 1, "jobs": 2},
        ]
    }
    keep_training_times(row, previous)
    first = {"run_dir": "runs/a_full", "trained": True, "wall_min": 126.5, "threads": 1, "jobs": 2}
    assert row["stages"][0] == first
    assert row["wall_min"] == 186.5
    assert row["trained"]
    assert (row["threads"], row["jobs"]) == (1, 2)


def test_a_row_reports_how_its_last_stage_trained():
    earlier = {"run_dir": "runs/c_5", "trained": True, "wall_min": 9.1, "threads": 1, "jobs": 2}
    previous = {"stages": [earlier]}
    row = {"threads": 2, "jobs": 1, "stages": [{"run_dir": "runs/c_5", "trained": False, "wall_min": 0.4}]}
    keep_training_times(row, previous)
    assert (row["wall_min"], row["threads"], row["jobs"]) == (9.1, 1, 2)


def test_a_stage_trained_before_threads_were_recorded_reports_none():
    previous = {"stages": [{"run_dir": "runs/d_5", "trained": True, "wall_min": 11.7}]}
    row = {"stages": [{"run_dir": "runs/d_5", "trained": False, "wall_min": 0.5, "threads": 1, "jobs": 2}]}
    keep_training_times(row, previous)
    assert (row["wall_min"], row["threads"], row["jobs"]) == (11.7, None, None)


def test_a_stage_only_evaluated_now_and_never_recorded_keeps_its_evaluation_time():
    row = {"stages": [{"run_dir": "runs/b_full", "trained": False, "wall_min": 3.0}]}
    keep_training_times(row, {})
    assert row["wall_min"] == 3.0
    assert not row["trained"]


def test_a_start_made_for_rl_can_write_its_own_results_file():
    # Making a start again (e.g. pi0 on 200 demonstrations for 12,000 steps) must not overwrite
    # the SFT table's row for that budget unless asked to.
    default = build_parser().parse_args([])
    assert results_files(default.results_name) == (
        RESULTS_DIR / "sft_pick_place.json",
        RESULTS_DIR / "sft_pick_place.png",
    )
    probe = build_parser().parse_args(["--results-name", "sft_pp12k"])
    assert results_files(probe.results_name)[0] == RESULTS_DIR / "sft_pp12k.json"
