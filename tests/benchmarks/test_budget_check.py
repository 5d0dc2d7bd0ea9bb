"""The budget check's table: each job's wall time against the limit, from what ``vla-rl train`` printed."""

from __future__ import annotations

from pathlib import Path

from benchmarks import budget_check
from vla_rl.training.chunk_rl.config_load import compose_rl_config

OUTPUT = (
    "INFO vla_rl.training.runner: plan: 245 updates of 2048 env steps (to 500000 env steps), a final "
    "evaluation of 16 episodes on train; cap 2 min, evaluations included\n"
    "trained 9 iterations, 18432 env steps in 1.80 min (max_minutes); checkpoint: runs/x\n"
)


def test_a_job_passes_within_the_limit_and_fails_over_it_or_on_an_error():
    row = budget_check.summarise("default", OUTPUT, 2.4, 0, 2.5)
    assert (row["within"], row["updates"]) == (True, 9)
    assert row["plan"].startswith("plan: 245 updates")
    assert not budget_check.summarise("default", OUTPUT, 2.6, 0, 2.5)["within"]
    assert budget_check.summarise("default", OUTPUT, 2.4, 1, 2.5)["within"]  # below its success target
    assert not budget_check.summarise("default", "Traceback", 0.1, 2, 2.5)["within"]
    table = budget_check.markdown([row, budget_check.summarise("x", "", 3.0, 0, 2.5)], "a machine", 2.0)
    assert "| `default` | 2.40 | 2.5 | yes | 9 | 0 |" in table
    assert "| `x` | 3.00 | 2.5 | **no** | - | 0 |" in table


def test_every_committed_recipe_runs_from_an_existing_start_under_the_cap(tmp_path):
    recipes = sorted(
        path.stem for path in (Path(budget_check.__file__).parents[1] / "configs" / "recipe").glob("*.yaml")
    )
    assert sorted(budget_check.RECIPE_STARTS) == recipes
    for recipe, start in budget_check.RECIPE_STARTS.items():
        assert (budget_check.STARTS_DIR / start).is_dir()
        command = budget_check.job_command(recipe, 2.0, tmp_path / recipe, [])
        assert "max_minutes=2.0" in command and f"recipe={recipe}" in command
        cfg = compose_rl_config([arg for arg in command[4:] if not arg.startswith("run_dir=")])
        assert start.startswith(cfg.policy.name)  # the start of the recipe's own policy family
    assert not any(
        arg.startswith("recipe=") for arg in budget_check.job_command("default", 2.0, tmp_path, [])
    )
