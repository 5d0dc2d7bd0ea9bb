"""LeRobot's own evaluation of an exported run, on vla-rl's env, agrees with vla-rl's episode by episode.

The LeRobot pi0 fixture cut to MuJoCo ``reach`` gets one Flow-SDE PPO update from ``vla-rl train``
and is exported by ``vla-rl export --format lerobot``; vla-rl evaluates the run's checkpoint as the
run does (greedy, 2 actions of each chunk, the run's evaluation seeds) while its env is recorded, and
``lerobot_pi_eval.py`` in .venv-lerobot evaluates the export with LeRobot's ``from_pretrained``,
processors and ``select_action`` (``n_action_steps`` 2) on the same env, episodes and noise stream.
The first chunk's actions agree within 1e-4 (float32), every episode ends the same way (success, at
some step, length) and the returns and executed actions stay close across the whole evaluation.

LeRobot's pi0 needs openpi's ``transformers_replace`` files: give an openpi checkout in
``OPENPI_DIR``; without it the test skips. ``benchmarks/lerobot_pi0_rl.py`` (stage ``lerobot_eval``)
runs the same comparison on the 64 evaluation episodes of its RL run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policies" / "flow"))
from lerobot_export_steps import FIXTURES, reach_folder, tiny_rl_run  # noqa: E402

from benchmarks.lerobot_eval import compare, evaluate_run  # noqa: E402
from vla_rl.cli import main  # noqa: E402

TOLERANCE = 1e-4
"""max |vla-rl - LeRobot| of the first chunk's actions (float32), the parity tests' bound."""
WORLDS, EPISODES, EPISODE_STEPS = 2, 4, 20
"""2 worlds x 2 episodes of 20 steps (the run's ``env.max_episode_steps``): 10 chunks per episode,
the second ones after an autoreset."""
RETURN_AGREEMENT = 0.01
"""The largest per-episode |return difference| as a share of the returns' spread across episodes:
float32 differences of 1e-7 in the actions grow through the closed loop (the next observation
depends on the last action), so returns agree closely but not bit for bit; the comparison must
still tell the episodes apart by far."""


def test_lerobot_evaluates_the_export_as_vla_rl_evaluates_the_run(
    openpi_dir: Path, run_lerobot: Callable[..., dict[str, np.ndarray]], tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    folder = reach_folder("pi0", tmp_path / "folder")
    run_dir, export = tmp_path / "run", tmp_path / "export"
    assert main(tiny_rl_run(run_dir, folder, "pi0", lora=False)) == 0
    assert main(["export", "--format", "lerobot", str(run_dir), str(export)]) == 0

    _, policy, ours = evaluate_run(run_dir, EPISODES, worlds=WORLDS)
    assert ours.spec["n_action_steps"] == 2 and ours.spec["skipped_draws_per_chunk"] == 10
    assert float(ours.episodes["success"].mean()) == ours.result.success_rate  # the recording is the run's
    (tmp_path / "spec.json").write_text(json.dumps(ours.spec))
    out = tmp_path / "lerobot_eval.npz"
    theirs = run_lerobot(
        "lerobot_pi_eval.py",
        "--openpi",
        openpi_dir,
        "--folder",
        export,
        "--tokenizer",
        FIXTURES / "pi0" / "tokenizer",
        "--spec",
        tmp_path / "spec.json",
        "--out",
        out,
        out=out,
    )
    result = compare(policy, ours, theirs)
    print(json.dumps(result, indent=1))
    assert result["first_observation_equal"]
    assert result["first_chunk_max_difference"] < TOLERANCE
    assert result["first_executed_max_difference"] < TOLERANCE
    # In these 20-step episodes the closed loop keeps every executed action within the bound too
    # (the benchmark's 50-step episodes of a trained policy drift further: see its results).
    assert result["executed_max_difference"] < TOLERANCE
    steps = EPISODES // WORLDS * EPISODE_STEPS
    assert result["steps"] == [steps, steps]
    assert int(theirs["chunks_planned"]) == steps // 2  # a chunk for all worlds every 2 steps
    assert result["episodes"] == EPISODES and result["episodes_same_world"]
    for key in ("success", "success_once", "length"):
        np.testing.assert_array_equal(theirs[key], ours.episodes[key], err_msg=key)
    spread = float(np.ptp(ours.episodes["return"]))
    assert spread > 0  # the episodes differ, so agreeing returns say something
    assert result["max_return_difference"] < RETURN_AGREEMENT * spread
